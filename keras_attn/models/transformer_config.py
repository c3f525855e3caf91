"""Reading model configurations: Google `bert_config.json`, Hugging Face
`config.json`, or a dict, normalised to one set of field names."""

import dataclasses
import json
import numbers
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
    "model_type": "checkpoint_family",
}

# Hugging Face `model_type` -> the checkpoint family it is stored as: the
# names and the position layout of its weights.
MODEL_TYPES = {
    "bert": "bert",
    "roberta": "roberta",
    "xlm-roberta": "roberta",
    "camembert": "roberta",
    "albert": "albert",
}

# Fields only ALBERT configs have: a Google `albert_config.json` (which names
# no `model_type`) holding one is an ALBERT checkpoint.
ALBERT_FIELDS = ("num_hidden_groups", "inner_group_num")

# Metadata that configuration files carry and that does not change the model.
IGNORED_KEYS = {
    "architectures",
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
    "classifier_dropout_prob",
}

# Keys whose non-default value means an architecture this library does not build.
REQUIRED_VALUES = {
    "position_embedding_type": "absolute",
    "is_decoder": False,
    "add_cross_attention": False,
    "is_encoder_decoder": False,
    # ALBERT: one shared block (released models); the rest are the defaults
    # of Google's albert_config.json for the standard architecture.
    "num_hidden_groups": 1,
    "inner_group_num": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "down_scale_factor": 1,
    "layers_to_keep": [],
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
    `hidden_dropout_prob`, `type_vocab_size`, `model_type`, ...) are accepted
    wherever a field is given. Every field's type and range is checked on
    construction, by `FIELD_RULES`: sizes are positive integers (booleans and
    floats such as `31.5` or `"2"` are refused), rates lie in `[0, 1)`, flags
    are booleans.
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
    # Whether the masked-LM logits come from the token embedding (BERT's
    # tied decoder) or from an own `MLM-Decoder` kernel.
    tie_word_embeddings: bool = True
    # How the checkpoint stores its weights: "bert", "roberta" or "albert"
    # (from a Hugging Face `model_type`; a Google `bert_config.json` is
    # "bert", an `albert_config.json` "albert");
    # None when the source does not say. The builder picks and checks the
    # variant with it.
    checkpoint_family: str | None = None

    def __post_init__(self):
        errors = [field_error(field.name, getattr(self, field.name)) for field in dataclasses.fields(self)]
        errors.append(token_id_error(self.vocab_size, self.pad_token_id, self.mask_token_id))
        for error in errors:
            if error:
                raise ValueError(f"TransformerConfig: {error}")

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


def _integer(minimum):
    def check(value):
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return None if value >= minimum else f"an integer >= {minimum}"
        return f"an integer >= {minimum}"

    return check


def _real(low, high=None, low_open=False):
    interval = f"{'(' if low_open else '['}{low}, {high if high is not None else 'inf'})"

    def check(value):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            return f"a number in {interval}"
        above = value > low if low_open else value >= low
        below = high is None or value < high
        return None if above and below else f"a number in {interval}"

    return check


def _boolean(value):
    return None if isinstance(value, bool) else "true or false"


def _one_of(choices):
    def check(value):
        return None if isinstance(value, str) and value in choices else f"one of {sorted(choices)}"

    return check


def _optional(check):
    return lambda value: None if value is None else check(value)


# What each field accepts: a check returning None, or what was expected.
FIELD_RULES = {
    "vocab_size": _integer(1),
    "hidden_size": _integer(1),
    "num_layers": _integer(1),
    "num_heads": _integer(1),
    "intermediate_size": _integer(1),
    "hidden_act": _one_of(ACTIVATIONS),
    "dropout_rate": _real(0, 1),
    "attention_dropout_rate": _real(0, 1),
    "max_position": _integer(1),
    "segment_vocab_size": _integer(0),
    "initializer_range": _real(0, low_open=True),
    "layer_norm_epsilon": _real(0, low_open=True),
    "pad_token_id": _integer(0),
    "embedding_size": _optional(_integer(1)),
    "attention_key_size": _optional(_integer(1)),
    "mask_token_id": _optional(_integer(0)),
    "attention_window": _optional(_integer(1)),
    "log_n_train_length": _optional(_integer(1)),
    "blockwise_attention": _boolean,
    "tta_diagonal_mask": _boolean,
    "tta_naive_key_value": _boolean,
    "tie_word_embeddings": _boolean,
    "checkpoint_family": _optional(_one_of(set(MODEL_TYPES.values()))),
}
assert set(FIELD_RULES) == FIELDS, "every TransformerConfig field needs a rule"


def field_error(name, value):
    """Why `value` is not valid for field `name` (a sentence), or None."""
    expected = FIELD_RULES[name](value)
    if expected is None:
        return None
    return f"`{name}` must be {expected}; received {value!r} ({type(value).__name__})."


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
        if key == "model_type":
            if value not in MODEL_TYPES:
                raise ValueError(
                    f"{origin} sets `model_type={value!r}`; this builder reads "
                    f"{sorted(MODEL_TYPES)} checkpoints."
                )
            value = MODEL_TYPES[value]
        if name in FIELDS:
            if name == "hidden_act" and isinstance(value, str) and value in ACTIVATIONS:
                value = ACTIVATIONS[value]
            error = field_error(name, value)
            if error:
                raise ValueError(f"{origin}: {error}")
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
            field, a field of the wrong type or out of range (the message
            names the field, the value and where it came from; see
            `FIELD_RULES`), an unknown `model_type`, or an unsupported
            architecture option.
    """
    values, origin = _read_source(source)
    fields = _normalise(values, origin, strict=False)
    if "checkpoint_family" not in fields and any(key in values for key in ALBERT_FIELDS):
        fields["checkpoint_family"] = "albert"
    if origin.startswith("configuration file") and "checkpoint_family" not in fields:
        # Google's bert_config.json names no model type: BERT's layout.
        fields["checkpoint_family"] = "bert"
    fields.update(_normalise(overrides, "overrides", strict=True))
    required = [
        field.name
        for field in dataclasses.fields(TransformerConfig)
        if field.default is dataclasses.MISSING and field.name not in fields
    ]
    if required:
        raise ValueError(f"{origin} lacks required fields {required}.")
    error = token_id_error(
        fields["vocab_size"],
        pad_token_id=fields.get("pad_token_id", TransformerConfig.pad_token_id),
        mask_token_id=fields.get("mask_token_id"),
    )
    if error:
        raise ValueError(f"{origin}: {error}")
    config = TransformerConfig(**fields)
    if config.hidden_size % config.num_heads:
        raise ValueError(
            f"{origin}: hidden_size={config.hidden_size} is not divisible by "
            f"num_heads={config.num_heads}."
        )
    return config


def token_id_error(vocab_size, pad_token_id, mask_token_id):
    """Why `pad_token_id` or `mask_token_id` is not a vocabulary id, or None."""
    for name, value in (("pad_token_id", pad_token_id), ("mask_token_id", mask_token_id)):
        if value is not None and value >= vocab_size:
            return (
                f"`{name}={value}` is not a token id of a vocabulary of "
                f"vocab_size={vocab_size}."
            )
    return None
