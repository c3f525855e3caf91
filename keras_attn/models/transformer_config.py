"""`TransformerConfig`, what the builder reads, in parts, and the rules its
fields obey. Configuration files are read by `config_files.load_config`."""

import dataclasses
import numbers

from keras_attn.checkpoints import families
from keras_attn.layers.disentangled_attention import POSITION_ATTENTION_TYPES
from keras_attn.layers.multi_head_attention import ROTARY_ENCODINGS
from keras_attn.layers.rope_scaling import rotary_width_error
from keras_attn.layers.rope_scaling import standard_rope_scaling
from keras_attn.models.variants import VARIANTS

# Activation spellings -> the feed-forward's names.
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

# The entries of `layer_types`: attention within `attention_window`, or
# over every key.
LAYER_TYPES = ("sliding_attention", "full_attention")


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """The attention's shapes and options (a part of `TransformerConfig`)."""

    num_heads: int
    # Grouped-query attention: the number of key/value heads, a divisor of
    # `num_heads` (1: multi-query attention); None: `num_heads`.
    num_key_value_heads: int | None = None
    # Per-head query/key width; defaults to `attention_head_size`.
    attention_key_size: int | None = None
    # Per-head value width (T5's `d_kv`, LLaMA's and Qwen3's `head_dim`,
    # which also set the query/key width); defaults to
    # `hidden_size // num_heads`.
    attention_head_size: int | None = None
    # Whether the projections have biases (LLaMA's `attention_bias`); None:
    # the variant's (`use_bias`).
    attention_bias: bool | None = None
    attention_dropout_rate: float = 0.1
    # A local attention window any variant takes (LocalMaskBaseline), and
    # which layers it applies to: None (every layer), or one entry per
    # layer, "sliding_attention" (the window) or "full_attention" (every
    # key), as transformers 5's `layer_types`.
    attention_window: int | None = None
    layer_types: list | None = None
    # With `attention_window`: the first positions every query also sees
    # (StreamingLLM's sink tokens), kept in a decoding cache beside the
    # window's ring. 0: none.
    attention_sink_tokens: int = 0
    # A learned sink logit per head joining each softmax (gpt-oss).
    attention_sinks: bool = False
    # Log-n scaling of the scores relative to a training length.
    log_n_train_length: int | None = None
    # With `attention_window` in a causal model: XPOS's blockwise attention.
    blockwise_attention: bool = False
    # GPT-2's `scale_attn_by_inverse_layer_idx`: block `i`'s scores are
    # also divided by `i + 1`.
    inverse_layer_attention_scale: bool = False
    # Gemma 2/3: scores scaled by `query_pre_attention_scalar ** -0.5`
    # instead of `key_size ** -0.5`; None: the latter.
    query_pre_attention_scalar: float | None = None
    # Gemma 2: scores capped as `c * tanh(s / c)`; None: uncapped.
    attention_logit_soft_cap: float | None = None
    # DeBERTa's disentangled attention (`DisentangledAttention`): its
    # position terms (`pos_att_type`, entries of `POSITION_ATTENTION_TYPES`;
    # None: plain attention), and whether the position table is projected by
    # the attention's own query/key projections (`share_att_key`).
    position_attention_types: list | None = None
    share_attention_key: bool = False

    def __post_init__(self):
        _check_part(self)
        if self.layer_types is not None:
            # A list, as a JSON round trip gives it back.
            object.__setattr__(self, "layer_types", list(self.layer_types))


@dataclasses.dataclass(frozen=True)
class PositionConfig:
    """How positions are encoded (a part of `TransformerConfig`)."""

    # The learned absolute position table's rows (BERT's), and RoPE
    # scalings' default original length.
    max_position: int = 512
    # Learned absolute positions past the table: True (alpha 0.4) or alpha
    # in (0, 1) makes a table of n rows number n * n positions
    # (bert4keras's `hierarchical_position`; see `PositionEmbedding`).
    hierarchical_position: bool | float = False
    # NEZHA: the distance where its functional relative positions clip.
    max_relative_position: int = 64
    # T5's relative position bias: its buckets and the distance where the
    # last bucket starts.
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    # Rotary variants: rotate the values too (RoFormer's `rotary_value`),
    # RoPE's base (`rope_theta`), the scaling of its frequencies for
    # contexts past the training length (`rope_scaling`/`rope_parameters`:
    # a dict with a `rope_type` and its parameters, kept in
    # `keras_attn.layers.rope_scaling.standard_rope_scaling`'s form, whose
    # `original_max_position_embeddings` defaults to `max_position`), and
    # the base of the "sliding_attention" layers of `layer_types`
    # (ModernBERT's `local_rope_theta`; None: `rotary_base`).
    rotary_value: bool = False
    rotary_base: float = 10000.0
    rope_scaling: dict | None = None
    sliding_rotary_base: float | None = None
    # DeBERTa's relative positions: log buckets (`position_buckets`; None:
    # exact distances), the distance they reach or the table's span
    # (`max_relative_positions`; None: `max_position`), the table's
    # LayerNorm (`norm_rel_ebd: layer_norm`), and whether learned absolute
    # positions are added to the embeddings (`position_biased_input`).
    position_buckets: int | None = None
    max_relative_distance: int | None = None
    relative_embedding_norm: bool = False
    position_biased_input: bool = True

    def __post_init__(self):
        _check_part(self)
        object.__setattr__(
            self, "rope_scaling", standard_rope_scaling(self.rope_scaling, self.max_position)
        )


@dataclasses.dataclass(frozen=True)
class FeedForwardConfig:
    """The feed-forward blocks (a part of `TransformerConfig`)."""

    intermediate_size: int
    # The activation; None: the variant's (`default_hidden_act`: GELU for
    # BERT's family, ReLU for T5 v1.0, ...).
    hidden_act: str | None = None
    # A gated feed-forward, `act(x W) * (x V)` (T5 v1.1, LLaMA); None: the
    # variant's (`default_feed_forward_gated`).
    feed_forward_gated: bool | None = None
    # Whether the projections have biases (`mlp_bias`); None: the variant's.
    mlp_bias: bool | None = None

    def __post_init__(self):
        _check_part(self)


@dataclasses.dataclass(frozen=True)
class NormConfig:
    """The normalisation layers (a part of `TransformerConfig`)."""

    layer_norm_epsilon: float = 1e-12
    # Whether LayerNorms have a bias (`beta`); ModernBERT's `norm_bias`.
    norm_bias: bool = True

    def __post_init__(self):
        _check_part(self)


# The parts of a `TransformerConfig`, by attribute name.
CONFIG_PARTS = {
    "attention": AttentionConfig,
    "positions": PositionConfig,
    "feed_forward": FeedForwardConfig,
    "norm": NormConfig,
}


@dataclasses.dataclass(frozen=True)
class _Core:
    # What is not a part's: the model's sizes, embeddings, ids and head.
    vocab_size: int
    hidden_size: int
    num_layers: int
    dropout_rate: float = 0.1
    segment_vocab_size: int = 2
    initializer_range: float = 0.02
    # The padding id; None for a vocabulary without one (GPT-2): padding
    # then comes from an explicit `padding_mask` only.
    pad_token_id: int | None = 0
    # Width of the token embeddings when factorised (RoBERTa+, ALBERT);
    # defaults to `hidden_size`.
    embedding_size: int | None = None
    # Encoder-decoders (T5): the decoder's depth (default `num_layers`) and
    # its first input id.
    num_decoder_layers: int | None = None
    decoder_start_token_id: int | None = None
    # The [MASK] id; T-TA's query stream starts from its embedding.
    mask_token_id: int | None = None
    # T-TA: mask the diagonal (pretraining); take keys/values from the
    # previous layer instead of the embeddings (the leaking ablation).
    tta_diagonal_mask: bool = True
    tta_naive_key_value: bool = False
    # The language model's logits capped as `c * tanh(x / c)` (Gemma 2's
    # `final_logit_softcapping`); None: uncapped.
    final_logit_soft_cap: float | None = None
    # A T5 checkpoint of the encoder alone (`T5EncoderModel`): the builder's
    # `variant=None` is then `"t5_encoder"`.
    encoder_only: bool = False
    # Whether the masked-LM logits come from the token embedding (BERT's
    # tied decoder) or from an own `MLM-Decoder` kernel.
    tie_word_embeddings: bool = True
    # A checkpoint trained as a causal decoder (Hugging Face's `is_decoder`):
    # the builder's `application=None` is then "lm".
    is_decoder: bool = False
    # How the checkpoint stores its weights: a family declared in
    # `keras_attn.checkpoints.families` (by the Hugging Face `model_type`; a
    # Google `bert_config.json` is "bert"); None when the source does not
    # say. The builder picks and checks the variant with it.
    checkpoint_family: str | None = None


# Every field under its one name, and the part holding it ("": the config
# itself).
_FIELD_PART = {
    field.name: part
    for part, cls in (("", _Core), *CONFIG_PARTS.items())
    for field in dataclasses.fields(cls)
}
FIELDS = frozenset(_FIELD_PART)
# Each field's default, for those that have one.
FIELD_DEFAULTS = {
    field.name: field.default
    for cls in (_Core, *CONFIG_PARTS.values())
    for field in dataclasses.fields(cls)
    if field.default is not dataclasses.MISSING
}
REQUIRED_FIELDS = tuple(name for name in _FIELD_PART if name not in FIELD_DEFAULTS)


class TransformerConfig:
    """What the builder reads: the model's sizes, ids and head, and four
    parts, `attention` (`AttentionConfig`), `positions` (`PositionConfig`),
    `feed_forward` (`FeedForwardConfig`) and `norm` (`NormConfig`).

    Built from fields under their one name (`TransformerConfig(vocab_size=
    ..., num_heads=..., rope_scaling=...)`, as `load_config` does) or from
    parts (`attention=AttentionConfig(...)`). Every field also reads by its
    name on the config (`config.num_heads` is `config.attention.num_heads`),
    and `to_dict()` gives them all in one flat dict, the form `.keras`
    files and `load_config` use. Configs are immutable: `replace(**fields)`
    gives a changed copy.

    Every field's type and range is checked on construction (`FIELD_RULES`:
    sizes are positive integers, booleans and floats such as `31.5` or `"2"`
    refused; rates in `[0, 1)`; flags booleans), then the rules between
    fields (token ids below `vocab_size`, `num_heads` a multiple of
    `num_key_value_heads`, `layer_types` one per layer, ...). A config with
    a `rope_scaling`, or of a checkpoint family that only rotary variants
    read, has RoPE's query/key width checked too
    (`rope_scaling.rotary_width_error`).

    Raises:
        ValueError: naming the field and the value; a TypeError for a name
            that is no field.
    """

    def __init__(self, attention=None, positions=None, feed_forward=None, norm=None, **fields):
        given = {"attention": attention, "positions": positions,
                 "feed_forward": feed_forward, "norm": norm}
        for part, value in given.items():
            if value is None:
                continue
            if not isinstance(value, CONFIG_PARTS[part]):
                raise TypeError(
                    f"TransformerConfig: `{part}` must be a {CONFIG_PARTS[part].__name__}; "
                    f"received {type(value).__name__}."
                )
            twice = sorted(set(fields) & set(_part_fields(part)))
            if twice:
                raise TypeError(f"TransformerConfig: {twice} given beside `{part}`, which holds them.")
            fields.update(dataclasses.asdict(value))
        unknown = sorted(set(fields) - FIELDS)
        if unknown:
            raise TypeError(
                f"TransformerConfig got unknown fields {unknown}; its fields are {sorted(FIELDS)}."
            )
        missing = [name for name in REQUIRED_FIELDS if name not in fields]
        if missing:
            raise TypeError(f"TransformerConfig is missing required fields {missing}.")
        values = {**FIELD_DEFAULTS, **fields}
        errors = [field_error(name, values[name]) for name in FIELD_RULES]
        errors.append(token_id_error(
            values["vocab_size"], values["pad_token_id"], values["mask_token_id"],
            values["decoder_start_token_id"],
        ))
        errors += _attention_errors(values)
        if not any(errors):
            errors.append(layer_types_error(
                values["layer_types"], values["num_layers"], values["attention_window"],
                values["sliding_rotary_base"],
            ))
        for error in errors:
            if error:
                raise ValueError(f"TransformerConfig: {error}")
        object.__setattr__(self, "_core", _Core(**_select(values, "")))
        for part, cls in CONFIG_PARTS.items():
            object.__setattr__(self, part, cls(**_select(values, part)))
        if self.rope_scaling is not None or reads_rotary_only(self.checkpoint_family):
            self.check_rotary_width()

    def __setattr__(self, name, value):
        raise AttributeError(
            f"TransformerConfig is immutable; use config.replace({name}=...) for a changed copy."
        )

    def to_dict(self):
        """Every field under its name, one flat dict (JSON-serialisable)."""
        values = dataclasses.asdict(self._core)
        for part in CONFIG_PARTS:
            values.update(dataclasses.asdict(getattr(self, part)))
        return {name: values[name] for name in FIELD_RULES}

    def replace(self, **changes):
        """A copy with `changes` (fields by name, or whole parts)."""
        values = self.to_dict()
        for part in CONFIG_PARTS:
            if part in changes:
                for name in _part_fields(part):
                    values.pop(name)
        return TransformerConfig(**{**values, **changes})

    def __eq__(self, other):
        if not isinstance(other, TransformerConfig):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None

    def __repr__(self):
        core = ", ".join(f"{name}={value!r}" for name, value in dataclasses.asdict(self._core).items())
        parts = ", ".join(f"{part}={getattr(self, part)!r}" for part in CONFIG_PARTS)
        return f"TransformerConfig({core}, {parts})"

    def __reduce__(self):
        return (_from_dict, (self.to_dict(),))

    def layer_window(self, index):
        """Block `index`'s attention window: `attention_window`, or None in a
        "full_attention" layer of `layer_types`."""
        if self.layer_types is not None and self.layer_types[index] == "full_attention":
            return None
        return self.attention_window

    def layer_rotary_base(self, index):
        """Block `index`'s RoPE base: `sliding_rotary_base` in a
        "sliding_attention" layer of `layer_types`, else `rotary_base`."""
        if self.sliding_rotary_base is not None and self.layer_types[index] == "sliding_attention":
            return self.sliding_rotary_base
        return self.rotary_base

    def check_rotary_width(self, reader=None):
        """Raises a ValueError naming the fields that give `key_size` (and
        `reader`, e.g. "variant='roformer'") when RoPE under `rope_scaling`
        cannot rotate that width (`rope_scaling.rotary_width_error`)."""
        error = rotary_width_error(self.key_size, self.rope_scaling)
        if error:
            where = "TransformerConfig" if reader is None else f"TransformerConfig for {reader}"
            raise ValueError(f"{where}: {error}; received {self._key_width()}.")

    def _key_width(self):
        """The fields that give `key_size`, with their values."""
        if self.attention_key_size is not None:
            return f"`attention_key_size`={self.attention_key_size}"
        if self.attention_head_size is not None:
            return f"`head_dim` (read as `attention_head_size`)={self.attention_head_size}"
        return (
            f"`hidden_size`={self.hidden_size} / `num_attention_heads`={self.num_heads} = "
            f"{self.key_size}"
        )

    @property
    def head_size(self):
        return self.attention_head_size or self.hidden_size // self.num_heads

    @property
    def key_size(self):
        return self.attention_key_size or self.head_size

    @property
    def decoder_layers(self):
        return self.num_decoder_layers or self.num_layers

    @property
    def embedding_width(self):
        return self.embedding_size or self.hidden_size


def _read_through(name, part):
    """The flat read of field `name`: from the part holding it."""
    if part:
        return property(lambda self: getattr(getattr(self, part), name))
    return property(lambda self: getattr(self._core, name))


for _name, _part in _FIELD_PART.items():
    setattr(TransformerConfig, _name, _read_through(_name, _part))
del _name, _part


def _from_dict(values):
    return TransformerConfig(**values)


def _part_fields(part):
    return [name for name, owner in _FIELD_PART.items() if owner == part]


def _select(values, part):
    return {name: values[name] for name in _part_fields(part)}


def _check_part(part):
    """A part's own checks (when built alone; `TransformerConfig` checks
    every field first, so its messages name it)."""
    values = dataclasses.asdict(part)
    errors = [field_error(name, value) for name, value in values.items()]
    if isinstance(part, AttentionConfig):
        errors += _attention_errors(values)
    for error in errors:
        if error:
            raise ValueError(f"{type(part).__name__}: {error}")


def _attention_errors(values):
    """The rules between attention fields (the first error only)."""
    if values["num_key_value_heads"] is not None and values["num_heads"] % values["num_key_value_heads"]:
        return [
            f"num_attention_heads={values['num_heads']} is not a multiple of "
            f"num_key_value_heads={values['num_key_value_heads']} (each key/value head "
            "serves num_attention_heads / num_key_value_heads query heads)."
        ]
    if values["attention_sink_tokens"] and values["attention_window"] is None:
        return [
            f"attention_sink_tokens={values['attention_sink_tokens']} keeps the first "
            "positions visible beside a local window and needs `attention_window`; "
            "received attention_window=None."
        ]
    if values["attention_sink_tokens"] and values["blockwise_attention"]:
        return [
            f"attention_sink_tokens={values['attention_sink_tokens']} is for a sliding "
            "window, not XPOS's blockwise attention (blockwise_attention=True)."
        ]
    return []


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


def _boolean_or(check):
    def either(value):
        if isinstance(value, bool):
            return None
        expected = check(value)
        return None if expected is None else f"true, false or {expected}"

    return either


def _rope_scaling(value):
    try:
        # Any `original_max_position_embeddings` will do here: a missing one
        # is `max_position` (`PositionConfig`).
        standard_rope_scaling(value, original_max_position_embeddings=1)
    except ValueError as error:
        return f"a rope scaling dict ({error})"
    return None


def _layer_types(value):
    expected = f"a list of {list(LAYER_TYPES)}"
    if not isinstance(value, (list, tuple)):
        return expected
    return None if all(entry in LAYER_TYPES for entry in value) else expected


def _position_attention_types(value):
    expected = f"a non-empty list of distinct entries of {list(POSITION_ATTENTION_TYPES)}"
    if not isinstance(value, (list, tuple)) or not value or len(set(value)) != len(value):
        return expected
    return None if all(entry in POSITION_ATTENTION_TYPES for entry in value) else expected


def _optional(check):
    return lambda value: None if value is None else check(value)


# What each field accepts: a check returning None, or what was expected.
FIELD_RULES = {
    "vocab_size": _integer(1),
    "hidden_size": _integer(1),
    "num_layers": _integer(1),
    "num_heads": _integer(1),
    "intermediate_size": _integer(1),
    "hidden_act": _optional(_one_of(ACTIVATIONS)),
    "dropout_rate": _real(0, 1),
    "attention_dropout_rate": _real(0, 1),
    "max_position": _integer(1),
    "segment_vocab_size": _integer(0),
    "initializer_range": _real(0, low_open=True),
    "layer_norm_epsilon": _real(0, low_open=True),
    "pad_token_id": _optional(_integer(0)),
    "embedding_size": _optional(_integer(1)),
    "attention_key_size": _optional(_integer(1)),
    "attention_head_size": _optional(_integer(1)),
    "num_key_value_heads": _optional(_integer(1)),
    "attention_bias": _optional(_boolean),
    "mlp_bias": _optional(_boolean),
    "feed_forward_gated": _optional(_boolean),
    "num_decoder_layers": _optional(_integer(1)),
    "relative_attention_num_buckets": _integer(2),
    "relative_attention_max_distance": _integer(1),
    "decoder_start_token_id": _optional(_integer(0)),
    "mask_token_id": _optional(_integer(0)),
    "attention_window": _optional(_integer(1)),
    "log_n_train_length": _optional(_integer(1)),
    "attention_sink_tokens": _integer(0),
    "attention_sinks": _boolean,
    "layer_types": _optional(_layer_types),
    "hierarchical_position": _boolean_or(_real(0, 1, low_open=True)),
    "blockwise_attention": _boolean,
    "tta_diagonal_mask": _boolean,
    "tta_naive_key_value": _boolean,
    "max_relative_position": _integer(1),
    "rotary_value": _boolean,
    "rotary_base": _real(1, low_open=True),
    "rope_scaling": _optional(_rope_scaling),
    "sliding_rotary_base": _optional(_real(1, low_open=True)),
    "norm_bias": _boolean,
    "inverse_layer_attention_scale": _boolean,
    "query_pre_attention_scalar": _optional(_real(0, low_open=True)),
    "attention_logit_soft_cap": _optional(_real(0, low_open=True)),
    "final_logit_soft_cap": _optional(_real(0, low_open=True)),
    "position_attention_types": _optional(_position_attention_types),
    "position_buckets": _optional(_integer(2)),
    "max_relative_distance": _optional(_integer(2)),
    "share_attention_key": _boolean,
    "relative_embedding_norm": _boolean,
    "position_biased_input": _boolean,
    "tie_word_embeddings": _boolean,
    "encoder_only": _boolean,
    "is_decoder": _boolean,
    # Read at every check: a family declared later is accepted too.
    "checkpoint_family": _optional(lambda value: _one_of(families.names())(value)),
}
assert set(FIELD_RULES) == FIELDS, "every TransformerConfig field needs a rule"


def field_error(name, value, key=None):
    """Why `value` is not valid for field `name` (a sentence), or None;
    `key` is the source's spelling of the field (`n_embd` for
    `hidden_size`), named first when it differs."""
    expected = FIELD_RULES[name](value)
    if expected is None:
        return None
    spelt = f"`{key}` (read as `{name}`)" if key not in (None, name) else f"`{name}`"
    return f"{spelt} must be {expected}; received {value!r} ({type(value).__name__})."


def reads_rotary_only(checkpoint_family):
    """Whether every registered variant that reads configs of
    `checkpoint_family` has rotary positions (LLaMA's, Qwen's, RoFormer's
    families), so that such a config's query/key width is RoPE's."""
    if checkpoint_family is None:
        return False
    readable = families.readable_families(checkpoint_family)
    readers = [cls for cls in VARIANTS.values() if cls.checkpoint_family in readable]
    return bool(readers) and all(cls.position_encoding in ROTARY_ENCODINGS for cls in readers)


def layer_types_error(layer_types, num_layers, attention_window, sliding_rotary_base):
    """Why `layer_types` (and `sliding_rotary_base`, which only its
    "sliding_attention" layers read) cannot describe a model of
    `num_layers` layers, or None."""
    if layer_types is None:
        if sliding_rotary_base is not None:
            return (
                f"`sliding_rotary_base={sliding_rotary_base!r}` is the RoPE base of the "
                "\"sliding_attention\" layers of `layer_types`, which is not given."
            )
        return None
    if len(layer_types) != num_layers:
        return (
            f"`layer_types` has {len(layer_types)} entries for num_layers={num_layers}; "
            "give one per layer."
        )
    if "sliding_attention" in layer_types and attention_window is None:
        return (
            "`layer_types` has \"sliding_attention\" layers but `attention_window` "
            "(their window) is not given."
        )
    return None


def token_id_error(vocab_size, pad_token_id, mask_token_id, decoder_start_token_id=None):
    """Why `pad_token_id`, `mask_token_id` or `decoder_start_token_id` is
    not a vocabulary id, or None."""
    for name, value in (
        ("pad_token_id", pad_token_id),
        ("mask_token_id", mask_token_id),
        ("decoder_start_token_id", decoder_start_token_id),
    ):
        if value is not None and value >= vocab_size:
            return (
                f"`{name}={value}` is not a token id of a vocabulary of "
                f"vocab_size={vocab_size}."
            )
    return None


# Reading configuration files moved to `config_files`; these names still
# import from here.
_MOVED_TO_CONFIG_FILES = {
    "ALIASES", "CONFIG_FILE_NAMES", "FEED_FORWARD_PROJECTIONS", "IGNORED_KEYS",
    "REQUIRED_VALUES", "REQUIRED_VALUE_REASONS", "ROPE_PARAMETERS_THETA",
    "find_config_file", "load_config",
}


def __getattr__(name):
    if name in _MOVED_TO_CONFIG_FILES:
        from keras_attn.models import config_files

        return getattr(config_files, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
