"""Qwen2 (Yang et al., 2024): LLaMA with query, key and value biases."""

from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


@register_variant("qwen2")
class Qwen2(Llama):
    """Qwen2: `Llama` whose query, key and value projections have biases
    (the attention's output projection and the feed-forward have none).

    Yang et al. (2024), "Qwen2 Technical Report",
    https://arxiv.org/abs/2407.10671. A config attending within a sliding
    window in some layers only (`use_sliding_window` with
    `max_window_layers`, or mixed `layer_types`) is refused; the released
    checkpoints have none.

    Checkpoints: Hugging Face `model_type: qwen2` directories, LLaMA's
    names.
    """

    checkpoint_family = "qwen2"
    default_attention_bias = True
    attention_output_bias = False
