"""Phi-3's checkpoints (Hugging Face `model_type: phi3`): LLaMA's names with
fused `qkv_proj` and `gate_up_proj` (`huggingface_phi3`), a sliding window
in every layer, and LongRoPE (`rope_scaling` of type `longrope`, or `su`)."""

from keras_attn.checkpoints import huggingface_phi3
from keras_attn.checkpoints.families import llama
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables

# Phi3Config's default `original_max_position_embeddings`.
ORIGINAL_MAX_POSITION = 4096
# Phi3Config's default `max_position_embeddings`.
MAX_POSITION = 4096


def prepare_config(values, model_type):
    """LLaMA's reading, then as transformers' Phi3Config reads its rope
    scaling (`rope_scaling` or `rope_parameters`): types `su` and `yarn`
    are `longrope`; the top-level `original_max_position_embeddings`
    (default 4096) replaces the scaling's own; a `longrope` without
    `factor` or `attention_factor` takes `factor = max_position_embeddings
    / original_max_position_embeddings`. `partial_rotary_factor` (at the
    top level, as older configs write it, or in the scaling) must be 1
    (every feature rotated); `sliding_window: null` is full causal
    attention."""
    values = llama.prepare_config(values, model_type)
    original = values.pop("original_max_position_embeddings", ORIGINAL_MAX_POSITION)
    if "sliding_window" in values and values["sliding_window"] is None:
        del values["sliding_window"]
    # Older configs (Phi-4-mini's) state the factor at the top level.
    check_every_feature_rotated(values.pop("partial_rotary_factor", 1.0), "partial_rotary_factor")
    key = "rope_parameters" if isinstance(values.get("rope_parameters"), dict) else "rope_scaling"
    scaling = values.get(key)
    if not isinstance(scaling, dict):
        return values
    scaling = dict(scaling)
    check_every_feature_rotated(
        scaling.pop("partial_rotary_factor", 1.0), f"{key}['partial_rotary_factor']"
    )
    rope_type = scaling.get("rope_type", scaling.get("type"))
    if rope_type in ("su", "yarn", "longrope"):
        scaling.pop("type", None)
        scaling["rope_type"] = "longrope"
        scaling["original_max_position_embeddings"] = original
        if scaling.get("factor") is None and scaling.get("attention_factor") is None:
            max_position = values.get("max_position_embeddings", MAX_POSITION)
            if isinstance(original, (int, float)) and original > 0:
                scaling["factor"] = max_position / original
    values[key] = scaling
    return values


def check_every_feature_rotated(partial, key):
    """Refuses a `partial_rotary_factor` other than 1 (read from `key`):
    this builder rotates every query/key feature."""
    if partial != 1.0:
        raise ValueError(
            f"A phi3 config's `{key}={partial!r}`: this builder rotates every query/key "
            "feature (1.0)."
        )


def config_defaults(fields):
    """LLaMA's, with Phi3Config's RMS epsilon (1e-5) and `max_position`."""
    fields.setdefault("layer_norm_epsilon", 1e-5)
    llama.defaults(MAX_POSITION)(fields)


PHI3 = llama.derived(
    name="phi3",
    title="Phi-3",
    description="Phi-3's (Hugging Face `model_type: phi3`): LLaMA's names with fused "
    "`qkv_proj` and `gate_up_proj`, LongRoPE",
    # Query i sees keys i - sliding_window < j <= i, as Mistral's.
    config_aliases={
        **llama.CONFIG_ALIASES,
        "sliding_window": "attention_window",
        "resid_pdrop": "dropout_rate",
    },
    prepare_config=prepare_config,
    config_defaults=config_defaults,
    # Phi3Model applies no embedding dropout.
    ignored_keys=llama.IGNORED_KEYS | {"embd_pdrop"},
    name_tables=name_tables(huggingface_phi3.NAME_TABLE),
    markers=(Marker("self_attn.qkv_proj", "'phi3'"),),
)
