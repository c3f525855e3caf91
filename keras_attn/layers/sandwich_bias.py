"""Sandwich: inner products of sinusoidal positions as a bias."""

import keras
from keras import ops

from keras_attn.layers.relative_position_bias import RelativePositionBias
from keras_attn.layers.sinusoids import check_even_width
from keras_attn.layers.sinusoids import sinusoid_angles


@keras.saving.register_keras_serializable(package="keras_attn")
class SandwichBias(RelativePositionBias):
    """`bias(i, j) = scale * (p_i . p_j)` with sinusoidal positions `p`.

    Chi, Fan, Rudnicky, Ramadge (2023), "Dissecting Transformer Length
    Extrapolation via the Lens of Receptive Field Analysis",
    https://arxiv.org/abs/2212.10356. With `p_n` the `dim`-wide sinusoidal
    encoding of Vaswani et al., frequencies `w_k = 10000^(-2k/dim)` (those of
    `SinusoidalPositionEmbedding`, from the same helper),

        p_i . p_j = sum_{k < dim/2} cos((i - j) w_k),

    a function of `i - j` that decays, with oscillations, as the distance
    grows; `bias(distance)` (see `RelativePositionBias`) computes it from the
    distance directly, `(1,) + distance.shape`. The same bias serves every
    head.

    Args:
        dim: width of the sinusoidal encoding (even).
        scale: `lambda`, the multiplier of the inner product.
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, ...)`; only its length is used.
        key: optional, defaults to `query`.

    Returns the bias, `(1, 1, query_length, key_length)`, float32.
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
