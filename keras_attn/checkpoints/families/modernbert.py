"""ModernBERT's checkpoints (Hugging Face `model_type: modernbert`): fused
query/key/value and gated feed-forward projections, global and local
attention layers with RoPE bases of their own."""

from keras_attn.checkpoints import huggingface_modernbert
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import MLM_REFERENCE
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables
from keras_attn.checkpoints.families.family import set_defaults

# ModernBertConfig's spellings.
CONFIG_ALIASES = {
    "hidden_activation": "hidden_act",
    "norm_eps": "layer_norm_epsilon",
}

# The values ModernBertConfig gives what a config leaves out, for the keys
# `prepare_config` reads.
NUM_LAYERS = 22
GLOBAL_EVERY = 3
LOCAL_ATTENTION = 128
GLOBAL_ROPE_THETA = 160000.0
LOCAL_ROPE_THETA = 10000.0
PAD_TOKEN_ID = 50283

# Fields of these configs that do not change the network this builder makes.
IGNORED_KEYS = frozenset({
    # The classification heads' pooling and the initialiser's truncation.
    "classifier_pooling", "initializer_cutoff_factor",
    # Special token ids (the padding id is read).
    "cls_token_id", "sep_token_id",
    # How transformers runs the same network: flash attention's determinism,
    # logits of the labelled positions only, unpadding and compilation
    # (the released configs' older keys).
    "deterministic_flash_attn", "sparse_prediction", "sparse_pred_ignore_index",
    "reference_compile", "repad_logits_with_grad", "unpad_inputs", "unpad_no_grad",
})

# Options this builder reads at one value only: dropout where this builder's
# dropout layers sit elsewhere (transformers drops after `attn.Wo` with
# `attention_dropout`, and inside the MLP), and the masked-LM head's dense
# layer without a bias and with a decoder bias, as the released models have.
REQUIRED_VALUES = {
    "attention_dropout": 0.0,
    "embedding_dropout": 0.0,
    "mlp_dropout": 0.0,
    "classifier_bias": False,
    "decoder_bias": True,
}


def prepare_config(values, model_type):
    """The attention pattern of a ModernBERT config, read into the fields
    `layer_types`, `attention_window`, `rope_theta` (the global layers') and
    `sliding_rotary_base` (the local layers').

    transformers 5 writes `layer_types` and `rope_parameters` (a dict per
    layer type); the released checkpoints' configs say
    `global_attn_every_n_layers` (layer `i` is global when `i % n == 0`),
    `global_rope_theta` and `local_rope_theta`. `layer_types` wins over
    `global_attn_every_n_layers`, and a `rope_parameters` theta over the
    other spelling's, as in transformers. A local layer's query sees the
    keys within `local_attention // 2` on each side, the bidirectional band
    of `attention_window=local_attention`. A dict without `model_type`
    (overrides) is read as given, in this library's field names."""
    if "model_type" not in values:
        return values
    values = dict(values)
    # transformers reads `norm_eps`; older configs carry a copy under this name.
    values.pop("layer_norm_eps", None)
    every = values.pop("global_attn_every_n_layers", GLOBAL_EVERY)
    if values.get("layer_types") is None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(
                f"A {model_type} config's `global_attn_every_n_layers` must be a "
                f"positive integer; received {every!r}."
            )
        values["layer_types"] = [
            "sliding_attention" if index % every else "full_attention"
            for index in range(values.get("num_hidden_layers", NUM_LAYERS))
        ]
    window = values.pop("local_attention", LOCAL_ATTENTION)
    # An odd width reads as transformers reads it: `local_attention // 2`
    # keys on each side, the bidirectional band's `attention_window // 2`.
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(
            f"A {model_type} config's `local_attention` is the width of the local "
            "layers' window, `local_attention // 2` keys on each side of the query: "
            f"a positive integer; received {window!r}."
        )
    values["attention_window"] = window
    values["rope_theta"], values["sliding_rotary_base"] = rope_thetas(values, model_type)
    classifier_activation = values.pop("classifier_activation", None)
    hidden_activation = values.get("hidden_activation", "gelu")
    if classifier_activation not in (None, hidden_activation):
        raise ValueError(
            f"A {model_type} config's `classifier_activation={classifier_activation!r}` "
            f"differs from `hidden_activation={hidden_activation!r}`; this builder's "
            "masked-LM head applies the feed-forward's activation."
        )
    return values


def rope_thetas(values, model_type):
    """`(global theta, local theta)` of a config, popping its RoPE keys;
    a RoPE scaling (a `rope_type` other than "default") is refused."""
    parameters = values.pop("rope_parameters", None) or {}
    spelt = {
        "full_attention": values.pop("global_rope_theta", GLOBAL_ROPE_THETA),
        "sliding_attention": values.pop("local_rope_theta", LOCAL_ROPE_THETA),
    }
    scaling = values.pop("rope_scaling", None)
    if scaling is not None:
        raise ValueError(
            f"A {model_type} config with `rope_scaling={scaling!r}`: this builder "
            "reads ModernBERT's unscaled RoPE only."
        )
    unknown = sorted(set(parameters) - set(spelt))
    if unknown:
        raise ValueError(
            f"A {model_type} config's `rope_parameters` has keys {unknown}; it holds "
            f"one dict per layer type, {sorted(spelt)}."
        )
    thetas = []
    for kind, theta in spelt.items():
        given = dict(parameters.get(kind) or {})
        rope_type = given.pop("rope_type", "default")
        if rope_type != "default":
            raise ValueError(
                f"A {model_type} config's `rope_parameters[{kind!r}]` has "
                f"rope_type={rope_type!r}; this builder reads ModernBERT's unscaled "
                "RoPE (\"default\") only."
            )
        thetas.append(given.get("rope_theta", theta))
    return tuple(thetas)


def config_defaults(fields):
    """ModernBertConfig's defaults for what a config leaves out (its padding
    id where the vocabulary has it)."""
    has_pad = fields.get("vocab_size", 0) > PAD_TOKEN_ID
    fields.setdefault("pad_token_id", PAD_TOKEN_ID if has_pad else None)
    _DEFAULTS(fields)


_DEFAULTS = set_defaults({
    "segment_vocab_size": 0,
    "dropout_rate": 0.0,
    "attention_dropout_rate": 0.0,
    "layer_norm_epsilon": 1e-5,
    "hidden_act": "gelu",
    "max_position": 8192,
    "norm_bias": False,
    "attention_bias": False,
    "mlp_bias": False,
})


MODERNBERT = CheckpointFamily(
    name="modernbert",
    title="ModernBERT",
    description="ModernBERT's (Hugging Face `model_type: modernbert`: `layers.{i}.attn."
    "Wqkv`, `mlp.Wi`, ..., global and local attention layers)",
    model_types=("modernbert",),
    config_aliases=CONFIG_ALIASES,
    prepare_config=prepare_config,
    config_defaults=config_defaults,
    required_values=REQUIRED_VALUES,
    ignored_keys=IGNORED_KEYS,
    default_variant="modernbert",
    name_tables=name_tables(huggingface_modernbert.NAME_TABLE),
    markers=(Marker("attn.Wqkv", "'modernbert'"),),
    references={**MLM_REFERENCE, **ENCODER_REFERENCE},
    architecture_applications={"ModernBertForMaskedLM": "mlm"},
    variant_modules=("modernbert",),
)
