"""BERT / LM with Sandwich biases instead of positions."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("sandwich")
class Sandwich(Bert):
    """No position embeddings; every layer adds `p_i . p_j` of sinusoidal
    positions of the head size's width (Chi et al., 2023,
    https://arxiv.org/abs/2212.10356)."""

    position_embedding = None
    relative_position_bias = "sandwich"
