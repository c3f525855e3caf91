"""Qwen2's checkpoints (Hugging Face `model_type: qwen2`): LLaMA's names,
with query, key and value biases."""

import numbers

from keras_attn.checkpoints.families import llama

# The keys that say which layers attend within a window.
WINDOW_KEYS = ("layer_types", "use_sliding_window", "max_window_layers", "sliding_window")


def sliding_layers(values, model_type):
    """`values` with the window keys of a Qwen config (`layer_types`, as
    transformers 5 writes it, else `use_sliding_window`, `max_window_layers`
    and `sliding_window`: layers from `max_window_layers` on attend within
    the window) read: `sliding_window` as `attention_window` when some layer
    has the window, and `layer_types` kept where it was given or only some
    layers have the window (so that an override of it replaces the
    folder's); none of them when no layer has a window."""
    values = dict(values)
    check_window_keys(values, model_type)
    window = values.get("sliding_window")
    layers = values.get("num_hidden_layers")
    kinds = values.get("layer_types")
    if kinds is None and values.get("use_sliding_window") and window is not None:
        first = values.get("max_window_layers", 28)
        kinds = ["sliding_attention" if i >= first else "full_attention" for i in range(layers or 0)]
    # Entries other than "full_attention" and "sliding_attention" are
    # refused by the config's own rule for `layer_types`, where they stay.
    kinds = kinds or []
    given = values.get("layer_types")
    for key in WINDOW_KEYS:
        values.pop(key, None)
    if "sliding_attention" in kinds and window is not None:
        # (An override of `layer_types` alone keeps the folder's window.)
        values["attention_window"] = window
    if given is not None or len(set(kinds)) > 1:
        # A `layer_types` given is kept: as an override it replaces the folder's.
        values["layer_types"] = list(kinds)
    return values


def check_window_keys(values, model_type):
    """Raises a ValueError naming the key and the value unless each window
    key given has the type transformers' Qwen2Config and Qwen3Config
    require: `use_sliding_window` a bool (the string "false" is true in
    Python, and would put a window in every layer), `max_window_layers` an
    integer (not a bool), `layer_types` a list (not a string, which would
    be read as a list of characters)."""
    where = f"A {model_type or 'Qwen'} config's"
    if "use_sliding_window" in values and not isinstance(values["use_sliding_window"], bool):
        raise ValueError(
            f"{where} `use_sliding_window` must be true or false; received "
            f"{_shown(values['use_sliding_window'])}."
        )
    first = values.get("max_window_layers", 0)
    if "max_window_layers" in values and (
        isinstance(first, bool) or not isinstance(first, numbers.Integral)
    ):
        raise ValueError(
            f"{where} `max_window_layers` (the first layer with the window) must be an "
            f"integer; received {_shown(first)}."
        )
    kinds = values.get("layer_types")
    if kinds is not None and not isinstance(kinds, (list, tuple)):
        # (Its entries are checked with the config's other fields.)
        raise ValueError(
            f"{where} `layer_types` must be a list, one entry per layer; received "
            f"{_shown(kinds)}."
        )


def _shown(value):
    return f"{value!r} ({type(value).__name__})"


def prepare_config(values, model_type):
    """LLaMA's, the window keys read by `sliding_layers`; `attention_bias`
    and `mlp_bias` are not Qwen2's (its query, key and value projections
    always have biases, its others none), so any are left out."""
    values = sliding_layers(llama.prepare_config(values, model_type), model_type)
    values.pop("attention_bias", None)
    values.pop("mlp_bias", None)
    return values


QWEN2 = llama.derived(
    name="qwen2",
    title="Qwen2",
    description="Qwen2's (Hugging Face `model_type: qwen2`): LLaMA's names, query/key/value "
    "biases",
    prepare_config=prepare_config,
    config_defaults=llama.defaults(32768),
)
