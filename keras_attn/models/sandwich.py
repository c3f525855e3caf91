"""BERT / LM with Sandwich biases instead of positions."""

from keras_attn import layers
from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("sandwich")
class Sandwich(Bert):
    """No position embeddings; every layer adds `p_i . p_j` of sinusoidal
    positions of the head size's width (Chi et al., 2023,
    https://arxiv.org/abs/2212.10356)."""

    def make_position_embedding(self):
        return None

    def make_position_bias(self):
        return layers.SandwichBias(dim=2 * (self.config.head_size // 2), name="Position-Bias")
