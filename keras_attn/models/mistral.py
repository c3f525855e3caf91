"""Mistral 7B (Jiang et al., 2023): LLaMA with a sliding attention window."""

from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


@register_variant("mistral")
class Mistral(Llama):
    """Mistral: `Llama` whose every layer attends within a sliding window.

    Jiang et al. (2023), "Mistral 7B", https://arxiv.org/abs/2310.06825. The
    config's `sliding_window` `w` is the attention window
    (`attention_window`): query `i` sees the keys `i - w < j <= i`, as
    transformers' Mistral does; the full pass computes only the band's
    blocks (`keras_attn.layers.banded`) and cached decoding keeps a ring of
    `w` keys per layer, so memory stays flat past the window.
    `sliding_window: null` is full causal attention.

    Checkpoints: Hugging Face `model_type: mistral` directories, LLaMA's
    names.
    """

    checkpoint_family = "mistral"
