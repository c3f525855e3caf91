"""Causal LM with XPOS rotary encodings."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("xpos")
class Xpos(Bert):
    """Rotary embeddings with XPOS's exponential decay (Sun et al., 2023,
    "A Length-Extrapolatable Transformer", https://arxiv.org/abs/2212.10554)
    on RoFormer's weights (BERT with no position table).
    XPOS is defined for causal attention, so this variant requires
    `application="lm"`. Its blockwise causal attention is the override pair
    `attention_window=block, blockwise_attention=True`."""

    position_encoding = "xpos"
    position_embedding = None
    applications = ("lm",)
    checkpoint_family = "roformer"
