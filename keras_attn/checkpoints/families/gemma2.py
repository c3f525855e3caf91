"""Gemma 2's checkpoints (Hugging Face `model_type: gemma2`): Gemma's
weights plus a norm after each sub-layer (`huggingface_gemma2`), soft-capped
attention and output logits, and sliding-window layers alternating with
global ones."""

from keras_attn.checkpoints import huggingface_gemma2
from keras_attn.checkpoints.families import gemma
from keras_attn.checkpoints.families import llama
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables

# Gemma2Config's spellings, beside LLaMA's.
CONFIG_ALIASES = {
    **llama.CONFIG_ALIASES,
    "hidden_activation": "hidden_act",
    "query_pre_attn_scalar": "query_pre_attention_scalar",
    "attn_logit_softcapping": "attention_logit_soft_cap",
    "final_logit_softcapping": "final_logit_soft_cap",
    # Query i sees keys i - sliding_window < j <= i in a "sliding_attention"
    # layer (transformers' `sliding_window_overlay`), the causal band of
    # `attention_window`.
    "sliding_window": "attention_window",
}

# What Gemma2Config gives a config that leaves these out.
NUM_LAYERS = 26
SLIDING_WINDOW = 4096
DEFAULTS = {
    "query_pre_attn_scalar": 256,
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
}


def layer_types(values, every, num_layers):
    """`values` with `layer_types`: the config's, else a "full_attention"
    layer after every `every - 1` "sliding_attention" ones (layer `i` is
    global when `(i + 1) % every == 0`, as Gemma2Config and Gemma3TextConfig
    fill it). Entries other than these two are refused, naming the value,
    by the config's rule for `layer_types`."""
    values = dict(values)
    if values.get("layer_types") is None:
        layers = values.get("num_hidden_layers", num_layers)
        values["layer_types"] = [
            "full_attention" if (index + 1) % every == 0 else "sliding_attention"
            for index in range(layers if isinstance(layers, int) else 0)
        ]
    return values


def prepare_config(values, model_type):
    """A Gemma 2 config read as transformers' Gemma2Config reads it: LLaMA's
    reading without `use_bidirectional_attention` (`gemma.check_causal`);
    `hidden_activation`, not `hidden_act` (older configs carry both);
    `layer_types` (`layer_types`), the window and the caps at Gemma2Config's
    defaults where left out. A dict without `model_type` (overrides) is
    read as given."""
    values = gemma.check_causal(llama.prepare_config(values, model_type), model_type)
    if "model_type" not in values:
        return values
    if "hidden_activation" in values:
        values.pop("hidden_act", None)
    values.setdefault("sliding_window", SLIDING_WINDOW)
    for key, value in DEFAULTS.items():
        values.setdefault(key, value)
    return layer_types(values, every=2, num_layers=NUM_LAYERS)


GEMMA2 = llama.derived(
    name="gemma2",
    title="Gemma 2",
    description="Gemma 2's (Hugging Face `model_type: gemma2`): Gemma's names plus "
    "`post_attention_layernorm`, `pre_feedforward_layernorm` and "
    "`post_feedforward_layernorm`",
    config_aliases=CONFIG_ALIASES,
    prepare_config=prepare_config,
    config_defaults=gemma.defaults(8192),
    name_tables=name_tables(huggingface_gemma2.NAME_TABLE),
    markers=(Marker("pre_feedforward_layernorm", "'gemma2' or 'gemma3'"),),
)
