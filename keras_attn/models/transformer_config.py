"""Reading model configurations: Google `bert_config.json`, Hugging Face
`config.json`, or a dict, normalised to one set of field names."""

import dataclasses
import json
import os
import warnings

# Source spellings of each field: Google's and Hugging Face's names.
ALIASES = {
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "hidden_dropout_prob": "dropout_rate",
    "attention_probs_dropout_prob": "attention_dropout_rate",
    "max_position_embeddings": "max_position",
    "type_vocab_size": "segment_vocab_size",
    "layer_norm_eps": "layer_norm_epsilon",
}

# Metadata that configuration files carry and that does not change the model.
IGNORED_KEYS = {
    "architectures",
    "model_type",
    "torch_dtype",
    "dtype",
    "transformers_version",
    "use_cache",
    "classifier_dropout",
    "bos_token_id",
    "eos_token_id",
    "directionality",
    "gradient_checkpointing",
    "output_past",
    "pooler_fc_size",
    "pooler_num_attention_heads",
    "pooler_num_fc_layers",
    "pooler_size_per_head",
    "pooler_type",
    "tokenizer_class",
    "_name_or_path",
    "id2label",
    "label2id",
    "problem_type",
    "return_dict",
    "output_attentions",
    "output_hidden_states",
    "chunk_size_feed_forward",
    "tie_word_embeddings",
}

# Keys whose non-default value means an architecture this library does not build.
REQUIRED_VALUES = {
    "position_embedding_type": "absolute",
    "is_decoder": False,
    "add_cross_attention": False,
    "is_encoder_decoder": False,
}

ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_approximate": "gelu_approximate",
    "relu": "relu",
    "tanh": "tanh",
    "swish": "silu",
    "silu": "silu",
}

CONFIG_FILE_NAMES = ("config.json", "bert_config.json")


@dataclasses.dataclass
class TransformerConfig:
    """The fields the builder reads, under one set of names.

    Google and Hugging Face spellings (`num_hidden_layers`,
    `hidden_dropout_prob`, `type_vocab_size`, ...) are accepted wherever a
    field is given.
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.1
    max_position: int = 512
    segment_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12
    pad_token_id: int = 0
    # Width of the token embeddings when factorised (RoBERTa+, ALBERT);
    # defaults to `hidden_size`.
    embedding_size: int | None = None
    # Per-head query/key width; defaults to `hidden_size // num_heads`.
    attention_key_size: int | None = None
    # The [MASK] id; T-TA's query stream starts from its embedding.
    mask_token_id: int | None = None
    # Inference-time options any variant takes: a local attention window
    # (LocalMaskBaseline) and log-n scaling relative to a training length.
    attention_window: int | None = None
    log_n_train_length: int | None = None
    # With attention_window in a causal model: XPOS's blockwise attention.
    blockwise_attention: bool = False
    # T-TA: mask the diagonal (pretraining); take keys/values from the
    # previous layer instead of the embeddings (the leaking ablation).
    tta_diagonal_mask: bool = True
    tta_naive_key_value: bool = False

    @property
    def head_size(self):
        return self.hidden_size // self.num_heads

    @property
    def key_size(self):
        return self.attention_key_size or self.head_size

    @property
    def embedding_width(self):
        return self.embedding_size or self.hidden_size

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


FIELDS = {field.name for field in dataclasses.fields(TransformerConfig)}


def find_config_file(directory):
    """The configuration file in a checkpoint directory, or None."""
    for name in CONFIG_FILE_NAMES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


def _read_source(source):
    if isinstance(source, TransformerConfig):
        return dataclasses.asdict(source), "the given TransformerConfig"
    if isinstance(source, dict):
        return dict(source), "the given config dict"
    path = os.fspath(source)
    if os.path.isdir(path):
        found = find_config_file(path)
        if found is None:
            raise FileNotFoundError(
                f"No configuration file in directory {path!r}: looked for "
                f"{' or '.join(CONFIG_FILE_NAMES)}; it holds {sorted(os.listdir(path))}."
            )
        path = found
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Configuration file {path!r} does not exist.")
    try:
        with open(path, encoding="utf-8") as file:
            values = json.load(file)
    except json.JSONDecodeError as error:
        raise ValueError(f"Configuration file {path!r} is not valid JSON: {error}") from error
    if not isinstance(values, dict):
        raise ValueError(f"Configuration file {path!r} does not hold a JSON object.")
    return values, f"configuration file {path!r}"


def _normalise(values, origin, strict):
    fields = {}
    for key, value in values.items():
        name = ALIASES.get(key, key)
        if name in FIELDS:
            if name in fields and fields[name] != value:
                raise ValueError(
                    f"{origin} gives `{name}` twice with different values "
                    f"({fields[name]!r} and {value!r} as `{key}`)."
                )
            fields[name] = value
        elif key in REQUIRED_VALUES:
            if value != REQUIRED_VALUES[key]:
                raise ValueError(
                    f"{origin} sets `{key}={value!r}`; this builder supports only "
                    f"`{key}={REQUIRED_VALUES[key]!r}`."
                )
        elif strict:
            raise ValueError(
                f"Unknown configuration field `{key}`. Known fields: "
                f"{sorted(FIELDS)} (Google / Hugging Face spellings "
                f"{sorted(ALIASES)} are accepted too)."
            )
        elif key not in IGNORED_KEYS:
            warnings.warn(f"{origin}: ignoring unknown field `{key}`.", stacklevel=3)
    return fields


def load_config(source, **overrides):
    """Reads a configuration and applies overrides.

    Args:
        source: path to a `bert_config.json` / `config.json`, a directory
            holding one, a dict, or a `TransformerConfig`.
        **overrides: fields to replace, by their names here or their Google /
            Hugging Face spellings. An unknown name is an error.

    Returns:
        A `TransformerConfig`.

    Raises:
        FileNotFoundError: no configuration file where one was expected.
        ValueError: invalid JSON, an unknown override, a missing required
            field, or an unsupported architecture option.
    """
    values, origin = _read_source(source)
    fields = _normalise(values, origin, strict=False)
    fields.update(_normalise(overrides, "overrides", strict=True))
    required = [
        field.name
        for field in dataclasses.fields(TransformerConfig)
        if field.default is dataclasses.MISSING and field.name not in fields
    ]
    if required:
        raise ValueError(f"{origin} lacks required fields {required}.")
    activation = fields.get("hidden_act", "gelu")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{origin}: unsupported `hidden_act={activation!r}`; supported: "
            f"{sorted(ACTIVATIONS)}."
        )
    fields["hidden_act"] = ACTIVATIONS[activation]
    config = TransformerConfig(**fields)
    if config.hidden_size % config.num_heads:
        raise ValueError(
            f"{origin}: hidden_size={config.hidden_size} is not divisible by "
            f"num_heads={config.num_heads}."
        )
    return config
