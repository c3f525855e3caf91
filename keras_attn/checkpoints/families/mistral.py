"""Mistral's checkpoints (Hugging Face `model_type: mistral`): LLaMA's
names, and a sliding window (`sliding_window`) in every layer."""

from keras_attn.checkpoints.families import llama


def prepare_config(values, model_type):
    """`sliding_window: null` is full causal attention. A config file's
    `layer_types` is left out: transformers' Mistral does not read it (it
    warns, and every layer attends within the window). An override's (the
    values without `model_type`: `build_transformer_model(folder,
    layer_types=[...])`) is kept, so the layers attend as it says, as
    transformers' Ministral reads it."""
    values = llama.prepare_config(values, model_type)
    if "model_type" in values:
        values.pop("layer_types", None)
    if "sliding_window" in values and values["sliding_window"] is None:
        del values["sliding_window"]
    return values


MISTRAL = llama.derived(
    name="mistral",
    title="Mistral",
    description="Mistral's (Hugging Face `model_type: mistral`): LLaMA's names, a "
    "sliding attention window",
    # Query i sees keys i - sliding_window < j <= i (transformers'
    # `sliding_window_overlay`), the causal band of `attention_window`.
    config_aliases={**llama.CONFIG_ALIASES, "sliding_window": "attention_window"},
    prepare_config=prepare_config,
    config_defaults=llama.defaults(4096 * 32),
)
