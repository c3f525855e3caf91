"""Sandwich: inner products of sinusoidal positions as a bias."""

import keras
from keras import ops

from keras_attn.layers.relative_position_bias import RelativePositionBias
from keras_attn.layers.sinusoids import check_even_width
from keras_attn.layers.sinusoids import sinusoid_angles


@keras.saving.register_keras_serializable(package="keras_attn")
class SandwichBias(RelativePositionBias):
    """`bias(i, j) = scale * (p_i . p_j)` with sinusoidal positions `p` (Chi et
    al., 2023, "Dissecting Transformer Length Extrapolation via the Lens of
    Receptive Field Analysis", https://arxiv.org/abs/2212.10356).

    With `p_n` the `dim`-wide encoding of `SinusoidalPositionEmbedding`,
    `w_k = 10000^(-2k/dim)`:

        p_i . p_j = sum_{k < dim/2} cos((i - j) w_k),

    decaying with oscillations as the distance grows; one bias for every head
    (`heads` 1). Called and returned as `RelativePositionBias`.

    Args:
        dim: width of the sinusoidal encoding (even).
        scale: `lambda`, the multiplier of the inner product.
        **kwargs: base layer arguments.
    """

    def __init__(self, dim=128, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        check_even_width(self, "dim", dim)
        self.dim = dim
        self.scale = scale

    def bias(self, distance):
        inner = ops.sum(ops.cos(sinusoid_angles(distance, self.dim)), axis=-1)
        return (self.scale * inner)[None]

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "scale": self.scale})
        return config
