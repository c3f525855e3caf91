"""Reading configuration files: Google's `bert_config.json`, Hugging Face's
`config.json` or a dict, under each family's spellings, into a
`TransformerConfig`."""

import json
import numbers
import os
import warnings

from keras_attn.checkpoints import families
from keras_attn.layers.rope_scaling import standard_rope_scaling
from keras_attn.models.transformer_config import ACTIVATIONS
from keras_attn.models.transformer_config import FIELD_DEFAULTS
from keras_attn.models.transformer_config import FIELDS
from keras_attn.models.transformer_config import REQUIRED_FIELDS
from keras_attn.models.transformer_config import TransformerConfig
from keras_attn.models.transformer_config import field_error
from keras_attn.models.transformer_config import token_id_error

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
    "rope_theta": "rotary_base",
    "rope_parameters": "rope_scaling",
}

# transformers 5 keeps `rope_theta` inside `rope_parameters`; `_normalise`
# reads it under this key (see `_rope_parameters`), which errors then name.
ROPE_PARAMETERS_THETA = "rope_parameters['rope_theta']"

# T5's `feed_forward_proj` -> `(hidden_act, feed_forward_gated)`, as
# Hugging Face reads it (`gated-gelu` is the tanh approximation).
FEED_FORWARD_PROJECTIONS = {
    "relu": ("relu", False),
    "gelu": ("gelu", False),
    "gated-gelu": ("gelu_approximate", True),
    "gated-relu": ("relu", True),
    "gated-silu": ("silu", True),
}

# `build_transformer_model` keywords that change what is built; found in a
# configuration they are an error (they would be ignored there), not a
# warning.
BUILDER_KEYWORDS = (
    "with_pool", "with_nsp", "padding_mask_input", "conditional_layer_norm",
    "conditional_layer_norm_hidden_size", "conditional_layer_norm_activation", "application",
    "keep_tokens", "compound_tokens",
)

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
    # ELECTRA's sequence-summary options, read only by its multiple-choice head.
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_last_dropout",
    # NEZHA's flag, read by `load_config` as the checkpoint family.
    "use_relative_position",
}

# Keys whose non-default value means an architecture this library does not build.
REQUIRED_VALUES = {
    "position_embedding_type": "absolute",
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

# Why a key of `REQUIRED_VALUES` must have its value, where that is not plain.
REQUIRED_VALUE_REASONS = {
    "add_cross_attention": (
        "cross-attention layers attend to an encoder's output (a BERT decoder "
        "inside an EncoderDecoderModel), which this builder does not build; a "
        "decoder without them (`is_decoder: true`, `add_cross_attention: false`, "
        "as BertLMHeadModel saves) loads as application='lm'"
    ),
}

CONFIG_FILE_NAMES = ("config.json", "bert_config.json")


def find_config_file(directory):
    """The configuration file in a checkpoint directory, or None."""
    for name in CONFIG_FILE_NAMES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


def _read_source(source):
    if isinstance(source, TransformerConfig):
        return source.to_dict(), "the given TransformerConfig"
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


def _normalise(values, origin, strict, model_type=None):
    """`values` under this library's field names. `model_type` (the
    source's, when it is an override dict) selects the family declaration
    whose config spellings, required values and ignored keys apply (see
    `keras_attn.checkpoints.families`)."""
    model_type = values.get("model_type", model_type)
    family = families.for_model_type(model_type)
    if family is not None and family.prepare_config is not None:
        values = family.prepare_config(values, model_type)
    family_aliases = family.config_aliases if family is not None else {}
    family_required = family.required_values if family is not None else {}
    family_ignored = family.ignored_keys if family is not None else ()
    aliases = {**ALIASES, ROPE_PARAMETERS_THETA: "rotary_base", **family_aliases}
    # A key the family reads as a field of its own is no required value.
    required_values = {
        key: value for key, value in REQUIRED_VALUES.items() if key not in family_aliases
    }
    model_types = families.model_types()
    fields = {}
    for key, value in _rope_parameters(values, origin).items():
        name = aliases.get(key, key)
        if name == "encoder_only" and key == "is_encoder_decoder":
            if not isinstance(value, bool):
                raise ValueError(
                    f"{origin}: `is_encoder_decoder` must be true or false; received "
                    f"{value!r} ({type(value).__name__})."
                )
            value = not value
        if key == "model_type":
            if value not in model_types:
                raise ValueError(
                    f"{origin} sets `model_type={value!r}`; this builder reads "
                    f"{sorted(model_types)} checkpoints."
                )
            value = model_types[value]
        elif key == "feed_forward_proj" or (name == "hidden_act" and isinstance(value, list)):
            value, fields["feed_forward_gated"] = _feed_forward_activation(key, value, origin)
            name = "hidden_act"
        if name in FIELDS:
            if name == "hidden_act" and isinstance(value, str) and value in ACTIVATIONS:
                value = ACTIVATIONS[value]
            error = field_error(name, value, key)
            if error:
                raise ValueError(f"{origin}: {error}")
            if name in fields and fields[name] != value:
                raise ValueError(
                    f"{origin} gives `{name}` twice with different values "
                    f"({fields[name]!r} and {value!r} as `{key}`)."
                )
            fields[name] = value
        elif key in required_values or key in family_required:
            expected = required_values.get(key, family_required.get(key))
            if value != expected:
                reason = REQUIRED_VALUE_REASONS.get(key)
                raise ValueError(
                    f"{origin} sets `{key}={value!r}`; this builder supports only "
                    f"`{key}={expected!r}`" + (f": {reason}." if reason else ".")
                )
        elif strict:
            raise ValueError(
                f"Unknown configuration field `{key}`. Known fields: "
                f"{sorted(FIELDS)} (Google / Hugging Face spellings "
                f"{sorted(ALIASES)} are accepted too)."
            )
        elif key in BUILDER_KEYWORDS:
            raise ValueError(
                f"{origin} has `{key}`, which is a keyword of build_transformer_model, "
                f"not a configuration field (the configuration would ignore it): pass "
                f"{key}={value!r} to build_transformer_model instead."
            )
        elif key not in IGNORED_KEYS and key not in family_ignored:
            warnings.warn(f"{origin}: ignoring unknown field `{key}`.", stacklevel=3)
    declared = families.get(fields.get("checkpoint_family"))
    if declared is not None and declared.config_defaults is not None:
        declared.config_defaults(fields)
    if "model_type" in values:
        _rope_scaling_as_transformers(fields, origin, "rope_parameters" if isinstance(
            values.get("rope_parameters"), dict) else "rope_scaling")
    return fields


def _rope_scaling_as_transformers(fields, origin, key):
    """A Hugging Face config's rope scaling (under `key`) read as transformers
    reads it, where this library's reading of the same dict differs:

    - `dynamic`: transformers' dynamic NTK takes `max_position_embeddings`
      as the original length and ignores an `original_max_position_embeddings`
      (it warns of an unrecognised key), so it is left out here too (and
      defaults to `max_position`), with a warning when it differed.
    - `yarn`: transformers 5 reads `factor`, as this library does;
      transformers 4.5x replaced it by `max_position_embeddings /
      original_max_position_embeddings` when the scaling gives the latter,
      so where the two differ the folder computes differently across
      transformers versions: a warning names both.
    """
    scaling = fields.get("rope_scaling")
    if not isinstance(scaling, dict):
        return
    rope_type = scaling.get("rope_type", scaling.get("type"))
    original = scaling.get("original_max_position_embeddings")
    max_position = fields.get("max_position", FIELD_DEFAULTS["max_position"])
    if not all(_is_number(value) for value in (original, max_position)):
        return  # refused, by name, by the field rules
    if rope_type == "dynamic":
        fields["rope_scaling"] = {
            name: value for name, value in scaling.items()
            if name != "original_max_position_embeddings"
        }
        if original != max_position:
            warnings.warn(
                f"{origin}: `{key}` gives rope_type 'dynamic' with "
                f"original_max_position_embeddings={original}, but transformers' dynamic "
                f"RoPE ignores that key and takes max_position_embeddings={max_position} as "
                f"the original length; so does this reading. (Pass rope_scaling=... to "
                "build_transformer_model to use another length.)",
                stacklevel=4,
            )
    elif rope_type == "yarn" and _is_number(scaling.get("factor")):
        factor, ratio = scaling["factor"], max_position / original
        if factor != ratio:
            warnings.warn(
                f"{origin}: `{key}` gives rope_type 'yarn' with factor={factor}, but "
                f"max_position_embeddings / original_max_position_embeddings = "
                f"{max_position} / {original} = {ratio:g}. This library reads factor="
                f"{factor}, as transformers 5 does; transformers 4.5x read the ratio "
                f"({ratio:g}) instead, so this folder computes differently across "
                "transformers versions. Make the two agree to silence this.",
                stacklevel=4,
            )


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0


def _rope_parameters(values, origin):
    """`values` with transformers 5's `rope_parameters` (`rope_type`,
    `rope_theta` and the type's parameters in one dict) split into its base,
    under the key `ROPE_PARAMETERS_THETA`, and its scaling; a `rope_scaling`
    given too must say the same."""
    parameters = values.get("rope_parameters")
    if not isinstance(parameters, dict):
        return values
    values = dict(values)
    parameters = dict(parameters)
    if "rope_theta" in parameters:
        values[ROPE_PARAMETERS_THETA] = parameters.pop("rope_theta")
    values["rope_parameters"] = parameters
    scaling = values.get("rope_scaling")
    if scaling is None:
        values.pop("rope_scaling", None)
        return values
    try:
        same = standard_rope_scaling(scaling, 1) == standard_rope_scaling(parameters, 1)
    except ValueError:
        same = False
    if not same:
        raise ValueError(
            f"{origin} gives `rope_scaling={scaling!r}` and `rope_parameters="
            f"{values['rope_parameters']!r}`, which differ; give one."
        )
    values.pop("rope_parameters")
    return values


def _feed_forward_activation(key, value, origin):
    """`(hidden_act, feed_forward_gated)` of T5's `feed_forward_proj` or of
    bert4keras's list form (`"hidden_act": ["gelu", "linear"]`: the product
    of a GELU branch and a linear one)."""
    if key == "feed_forward_proj":
        if value not in FEED_FORWARD_PROJECTIONS:
            raise ValueError(
                f"{origin}: `feed_forward_proj` must be one of "
                f"{sorted(FEED_FORWARD_PROJECTIONS)}; received {value!r}."
            )
        return FEED_FORWARD_PROJECTIONS[value]
    if len(value) != 2 or value[1] != "linear" or value[0] not in ACTIVATIONS:
        raise ValueError(
            f"{origin}: a list `hidden_act` is bert4keras's gated feed-forward, "
            f"[activation, 'linear'] with an activation of {sorted(ACTIVATIONS)}; "
            f"received {value!r}."
        )
    return ACTIVATIONS[value[0]], True


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
    model_type = values.get("model_type")
    if "checkpoint_family" not in fields:
        # A family's own fields (ALBERT's, NEZHA's) say what `model_type` does not.
        recognised = families.recognise_config(values)
        if recognised is not None:
            fields["checkpoint_family"] = recognised
    if origin.startswith("configuration file") and "checkpoint_family" not in fields:
        # Google's bert_config.json names no model type.
        fields["checkpoint_family"] = families.GOOGLE_CONFIG_FAMILY
    fields.update(_normalise(overrides, "overrides", strict=True, model_type=model_type))
    required = [name for name in REQUIRED_FIELDS if name not in fields]
    if required:
        raise ValueError(f"{origin} lacks required fields {required}.")
    error = token_id_error(
        fields["vocab_size"],
        pad_token_id=fields.get("pad_token_id", FIELD_DEFAULTS["pad_token_id"]),
        mask_token_id=fields.get("mask_token_id"),
        decoder_start_token_id=fields.get("decoder_start_token_id"),
    )
    if error:
        raise ValueError(f"{origin}: {error}")
    config = TransformerConfig(**fields)
    if config.attention_head_size is None and config.hidden_size % config.num_heads:
        raise ValueError(
            f"{origin}: hidden_size={config.hidden_size} is not divisible by "
            f"num_heads={config.num_heads}."
        )
    return config
