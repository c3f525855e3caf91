"""Phi-3 (Abdin et al., 2024): LLaMA with a sliding window and LongRoPE."""

from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


@register_variant("phi3")
class Phi3(Llama):
    """Phi-3: `Llama` whose every layer may attend within a sliding window,
    with LongRoPE for its long-context configs.

    Abdin et al. (2024), "Phi-3 Technical Report",
    https://arxiv.org/abs/2404.14219. The config's `sliding_window` is the
    attention window, as Mistral's. Its 128k configs scale RoPE by LongRoPE
    (`rope_scaling` type `longrope`, or the legacy `su`; see
    `keras_attn.layers.rope_scaling`): the short factors while the length
    encoded is at most `original_max_position_embeddings`, the long ones for
    every position past it, the attention factor on both sides; `generate`
    encodes the whole sequence again at the step that crosses that length,
    as transformers' Phi-3 drops its cache there.

    Checkpoints: Hugging Face `model_type: phi3` directories: LLaMA's names,
    with `self_attn.qkv_proj` (queries, keys and values side by side) and
    `mlp.gate_up_proj` (gate, then up) read as the separate projections.
    """

    checkpoint_family = "phi3"
