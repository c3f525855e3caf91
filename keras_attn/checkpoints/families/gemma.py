"""Gemma's checkpoints (Hugging Face `model_type: gemma`): LLaMA's names,
norms of `x * (1 + w)`, a scaled token embedding and a GeGLU feed-forward;
and the config reading Gemma 2 and Gemma 3 (`families.gemma2`,
`families.gemma3`) build on."""

from keras_attn.checkpoints.families import llama


def check_causal(values, model_type):
    """Raises a ValueError unless the config's `use_bidirectional_attention`
    is absent, null or false (this builder reads Gemma's causal decoders,
    not the bidirectional encoders transformers builds from the same
    configs); returns `values` without it."""
    values = dict(values)
    bidirectional = values.pop("use_bidirectional_attention", None)
    if bidirectional not in (None, False):
        raise ValueError(
            f"A {model_type} config's `use_bidirectional_attention={bidirectional!r}`: this "
            "builder reads Gemma's causal decoders only (null or false)."
        )
    return values


def prepare_config(values, model_type):
    """LLaMA's reading, without `use_bidirectional_attention` (see
    `check_causal`); `hidden_act: "gelu"`, the released configs' spelling,
    is the tanh approximation, as transformers' GemmaConfig reads it, and
    `hidden_activation`, which GemmaConfig does not read, is left out."""
    values = check_causal(llama.prepare_config(values, model_type), model_type)
    if "model_type" in values:
        values.pop("hidden_activation", None)
        if values.get("hidden_act") == "gelu":
            values["hidden_act"] = "gelu_pytorch_tanh"
    return values


def defaults(max_position):
    """The `config_defaults` of a Gemma family whose configs default
    `max_position_embeddings` to `max_position`: LLaMA's, with a tied head
    and the tanh GELU."""
    llama_defaults = llama.defaults(max_position)

    def config_defaults(fields):
        fields.setdefault("tie_word_embeddings", True)
        fields.setdefault("hidden_act", "gelu_approximate")
        llama_defaults(fields)

    return config_defaults


GEMMA = llama.derived(
    name="gemma",
    title="Gemma",
    description="Gemma's (Hugging Face `model_type: gemma`): LLaMA's names, `1 + w` RMS "
    "norms, a GeGLU feed-forward",
    prepare_config=prepare_config,
    config_defaults=defaults(8192),
)
