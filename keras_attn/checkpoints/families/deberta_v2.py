"""DeBERTa v2 and v3's checkpoints (Hugging Face `model_type: deberta-v2`):
BERT's block layout under DeBERTa's names (`huggingface_deberta_v2`), with
disentangled attention over a shared table of relative embeddings."""

from keras_attn.checkpoints import huggingface_deberta_v2
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import MLM_REFERENCE
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables
from keras_attn.checkpoints.families.family import set_defaults

# DebertaV2Config's spellings.
CONFIG_ALIASES = {
    "pos_att_type": "position_attention_types",
    "max_relative_positions": "max_relative_distance",
    "share_att_key": "share_attention_key",
}

# The values DebertaV2Config (or the modeling code's `getattr`) gives what a
# config leaves out, for the keys `prepare_config` reads.
MAX_POSITION = 512
LAYER_NORM_EPSILON = 1e-7

# The values of `norm_rel_ebd` (`|`-separated) transformers reads.
RELATIVE_EMBEDDING_NORMS = ("none", "layer_norm")

# Fields of these configs that do not change the network this builder makes:
# the MLM head's variant (both are read), the pooler's dropout and its
# activation (`with_pool=` chooses it), special token ids.
IGNORED_KEYS = frozenset({
    "legacy", "pooler_dropout", "pooler_hidden_act", "cls_token_id", "sep_token_id",
    "mask_token_id", "unk_token_id",
})


def _refuse(model_type, key, value, why):
    raise ValueError(f"A {model_type} config's `{key}={value!r}`: {why}")


def prepare_config(values, model_type):
    """DeBERTa's options read as transformers' DebertaV2 modules read them:
    `pos_att_type` as a list (an old config's `"p2c|c2p"` string split on
    `|`), dropped with `relative_attention: false` (then plain attention;
    a non-empty `pos_att_type` would still change the scale, and is
    refused); `position_buckets` and `max_relative_positions` below 1 as
    unset; `norm_rel_ebd` (`none` or `layer_norm`) as
    `relative_embedding_norm`. Refused, naming the key: an unknown
    `pos_att_type` entry or `norm_rel_ebd`, the convolution layer
    (`conv_kernel_size > 0`), an `embedding_size` other than `hidden_size`
    (a projection before the embedding LayerNorm), a `pooler_hidden_size`
    other than `hidden_size`. A dict without `model_type` (overrides) is
    read as given, in this library's field names."""
    if "model_type" not in values:
        return values
    values = dict(values)
    types = values.pop("pos_att_type", None)
    if isinstance(types, str):
        types = [entry.strip() for entry in types.lower().split("|") if entry.strip()]
    relative = values.pop("relative_attention", False)
    if not isinstance(relative, bool):
        _refuse(model_type, "relative_attention", relative, "must be true or false.")
    if types is not None and not isinstance(types, (list, tuple)):
        _refuse(model_type, "pos_att_type", types, 'must be a list such as ["p2c", "c2p"].')
    if relative:
        if not types:
            _refuse(model_type, "pos_att_type", types,
                    'relative attention needs "c2p", "p2c" or both.')
        unknown = [entry for entry in types if entry not in ("c2p", "p2c")]
        if unknown:
            _refuse(model_type, "pos_att_type", types,
                    f'{unknown} are not position terms; the terms are "c2p" and "p2c".')
        values["pos_att_type"] = list(types)
    elif types:
        _refuse(model_type, "pos_att_type", types,
                "with `relative_attention: false` the terms are not computed but still "
                "change the scores' scale; this builder does not build that.")
    for key in ("position_buckets", "max_relative_positions"):
        value = values.pop(key, -1)
        if isinstance(value, bool) or not isinstance(value, int):
            _refuse(model_type, key, value, "must be an integer (below 1: unset).")
        if value > 0:
            values[key] = value
    norms = values.pop("norm_rel_ebd", "none")
    if not isinstance(norms, str):
        _refuse(model_type, "norm_rel_ebd", norms, f"must be one of {RELATIVE_EMBEDDING_NORMS}.")
    norms = [entry.strip() for entry in norms.lower().split("|")]
    unknown = [entry for entry in norms if entry not in RELATIVE_EMBEDDING_NORMS]
    if unknown:
        _refuse(model_type, "norm_rel_ebd", values.get("norm_rel_ebd", "|".join(norms)),
                f"{unknown} unknown; the values are {list(RELATIVE_EMBEDDING_NORMS)}.")
    values["relative_embedding_norm"] = "layer_norm" in norms
    kernel = values.pop("conv_kernel_size", 0)
    if kernel:
        _refuse(model_type, "conv_kernel_size", kernel,
                "the convolution layer after the first block (some v2 xlarge "
                "checkpoints) is not built by this builder.")
    for key in ("conv_groups", "conv_act"):
        values.pop(key, None)
    hidden = values.get("hidden_size")
    for key in ("embedding_size", "pooler_hidden_size"):
        if values.get(key, hidden) != hidden:
            _refuse(model_type, key, values[key],
                    f"differs from `hidden_size`={hidden}; this builder reads DeBERTa "
                    "with one width.")
        values.pop(key, None)
    return values


# DebertaV2Config's defaults for what a config leaves out.
config_defaults = set_defaults({
    "segment_vocab_size": 0,
    "layer_norm_epsilon": LAYER_NORM_EPSILON,
    "max_position": MAX_POSITION,
    "hidden_act": "gelu",
})


DEBERTA_V2 = CheckpointFamily(
    name="deberta_v2",
    title="DeBERTa-v2",
    description="DeBERTa v2's and v3's (Hugging Face `model_type: deberta-v2`: "
    "`encoder.layer.{i}.attention.self.query_proj`, ..., `encoder.rel_embeddings`)",
    model_types=("deberta-v2",),
    config_aliases=CONFIG_ALIASES,
    prepare_config=prepare_config,
    config_defaults=config_defaults,
    ignored_keys=IGNORED_KEYS,
    default_variant="deberta_v2",
    name_tables=name_tables(huggingface_deberta_v2.NAME_TABLE),
    markers=(Marker("attention.self.query_proj", "'deberta_v2'"),),
    references={**MLM_REFERENCE, **ENCODER_REFERENCE},
    architecture_applications={"DebertaV2ForMaskedLM": "mlm"},
    variant_modules=("deberta_v2",),
)
