"""Gemma 3's text checkpoints (Hugging Face `model_type: gemma3_text`):
Gemma 2's weights plus per-head query/key norms, a RoPE base for the
sliding-window layers and one for the global layers, and rope scaling on
the global layers only."""

from keras_attn.checkpoints.families import gemma
from keras_attn.checkpoints.families import gemma2
from keras_attn.checkpoints.families import llama

# What Gemma3TextConfig gives a config that leaves these out.
NUM_LAYERS = 26
SLIDING_WINDOW_PATTERN = 6
GLOBAL_ROPE_THETA = 1_000_000.0
LOCAL_ROPE_THETA = 10_000.0
DEFAULTS = {"query_pre_attn_scalar": 256, "final_logit_softcapping": None}
LAYER_KINDS = ("full_attention", "sliding_attention")


def rope_fields(values, model_type):
    """`values` with Gemma 3's RoPE keys read into `rope_theta` and
    `rope_scaling` (the global layers') and `sliding_rotary_base` (the
    sliding layers').

    transformers 5 writes `rope_parameters`, one dict per layer type
    (`{"full_attention": {...}, "sliding_attention": {...}}`); older configs
    say `rope_theta`, `rope_local_base_freq` and `rope_scaling` (the global
    layers'). A `rope_parameters` theta wins over the other spelling's, as
    in Gemma3TextConfig. The sliding layers' RoPE must be unscaled."""
    values = dict(values)
    parameters = values.pop("rope_parameters", None) or {}
    where = f"A {model_type} config's `rope_parameters`"
    if not isinstance(parameters, dict) or set(parameters) - set(LAYER_KINDS):
        raise ValueError(
            f"{where} holds one dict per layer type, {list(LAYER_KINDS)}; received "
            f"{parameters!r}."
        )
    full = dict(values.pop("rope_scaling", None) or {})
    full.update(parameters.get("full_attention") or {})
    sliding = dict(parameters.get("sliding_attention") or {})
    local_theta = values.pop("rope_local_base_freq", LOCAL_ROPE_THETA)
    values["rope_theta"] = full.pop("rope_theta", values.get("rope_theta", GLOBAL_ROPE_THETA))
    values["sliding_rotary_base"] = sliding.pop("rope_theta", local_theta)
    if sliding.get("rope_type", "default") != "default":
        raise ValueError(
            f"{where}['sliding_attention'] has rope_type={sliding['rope_type']!r}; this "
            "builder scales the global layers' RoPE only (\"default\" in the sliding "
            "layers)."
        )
    values["rope_scaling"] = full if full.get("rope_type", full.get("type", "default")) != (
        "default"
    ) else None
    return values


def prepare_config(values, model_type):
    """A Gemma 3 text config read as transformers' Gemma3TextConfig reads
    it: Gemma 2's reading (`gemma2.prepare_config`) with its own defaults,
    `layer_types` from `sliding_window_pattern` where not given (every
    `sliding_window_pattern`-th layer global), the RoPE keys of
    `rope_fields`. `attn_logit_softcapping` is left out: transformers'
    Gemma 3 attention does not apply it. (A `gemma3` folder, the vision and
    text `Gemma3ForConditionalGeneration`, is no family's: the config reader
    refuses it, naming the `model_type`s it reads, `gemma3_text` among
    them.)"""
    if "model_type" not in values:
        return gemma.check_causal(llama.prepare_config(values, model_type), model_type)
    values = dict(values)
    values.pop("attn_logit_softcapping", None)
    for key, value in DEFAULTS.items():
        values.setdefault(key, value)
    pattern = values.pop("sliding_window_pattern", SLIDING_WINDOW_PATTERN)
    if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
        raise ValueError(
            f"A {model_type} config's `sliding_window_pattern` must be a positive integer "
            f"(every such layer is global); received {pattern!r}."
        )
    values = gemma2.layer_types(values, every=pattern, num_layers=NUM_LAYERS)
    values = gemma2.prepare_config(rope_fields(values, model_type), model_type)
    # Gemma 2's default caps are not Gemma 3's: none but those given.
    values.pop("attn_logit_softcapping", None)
    return values


GEMMA3 = llama.derived(
    name="gemma3",
    title="Gemma 3",
    description="Gemma 3's (Hugging Face `model_type: gemma3_text`): Gemma 2's names plus "
    "per-head query/key norms",
    model_types=("gemma3_text",),
    config_aliases=gemma2.CONFIG_ALIASES,
    prepare_config=prepare_config,
    config_defaults=gemma.defaults(131072),
    # transformers' private copy of `sliding_window_pattern`, which
    # `layer_types` (written beside it) already says.
    ignored_keys=llama.IGNORED_KEYS | {"_sliding_window_pattern"},
    # (Gemma 2's marker, `pre_feedforward_layernorm`, names this family too.)
    name_tables=gemma2.GEMMA2.name_tables,
)
