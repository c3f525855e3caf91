"""Qwen3 (Yang et al., 2025): LLaMA with per-head query and key norms."""

from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


@register_variant("qwen3")
class Qwen3(Llama):
    """Qwen3: `Llama` that normalises each query and key head with an RMS
    norm (`q_norm`, `k_norm`, over `head_dim`, before RoPE).

    Yang et al. (2025), "Qwen3 Technical Report",
    https://arxiv.org/abs/2505.09388. `head_dim` is usually not
    `hidden_size / num_attention_heads` (128 for every size), and
    `attention_bias` adds biases to all four attention projections.
    Sliding windows are read as for Qwen2.

    Checkpoints: Hugging Face `model_type: qwen3` directories, LLaMA's
    names plus `self_attn.q_norm` and `self_attn.k_norm`.
    """

    checkpoint_family = "qwen3"
    query_key_norm = True
