"""Qwen2 (Yang et al., 2024): LLaMA with query, key and value biases."""

from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


@register_variant("qwen2")
class Qwen2(Llama):
    """Qwen2: `Llama` whose query, key and value projections have biases
    (the attention's output projection and the feed-forward have none).

    Yang et al. (2024), "Qwen2 Technical Report",
    https://arxiv.org/abs/2407.10671. A config may attend within a sliding
    window in some layers only (`use_sliding_window` with
    `max_window_layers`: the layers from that index on, or transformers 5's
    `layer_types`): those layers get `attention_window`, the others attend
    to every earlier token, and cached decoding keeps every position (each
    layer masks its own band). The released checkpoints have no window.

    Checkpoints: Hugging Face `model_type: qwen2` directories, LLaMA's
    names.
    """

    checkpoint_family = "qwen2"
    default_attention_bias = True
    attention_output_bias = False
