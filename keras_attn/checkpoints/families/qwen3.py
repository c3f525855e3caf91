"""Qwen3's checkpoints (Hugging Face `model_type: qwen3`): LLaMA's names
and a per-head RMS norm of the queries and keys (`q_norm`, `k_norm`)."""

from keras_attn.checkpoints.families import llama
from keras_attn.checkpoints.families import qwen2
from keras_attn.checkpoints.families.family import Marker


def prepare_config(values, model_type):
    """LLaMA's, the window keys read as Qwen2's (`qwen2.sliding_layers`)."""
    return qwen2.sliding_layers(llama.prepare_config(values, model_type), model_type)


QWEN3 = llama.derived(
    name="qwen3",
    title="Qwen3",
    description="Qwen3's (Hugging Face `model_type: qwen3`): LLaMA's names, per-head "
    "query/key RMS norms",
    prepare_config=prepare_config,
    config_defaults=llama.defaults(32768),
    markers=(Marker("self_attn.q_norm", "'qwen3'"),),
)
