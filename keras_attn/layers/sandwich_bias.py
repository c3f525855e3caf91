"""Sandwich: inner products of sinusoidal positions as a bias."""

import keras
from keras import ops

from keras_attn.layers import masking


@keras.saving.register_keras_serializable(package="keras_attn")
class SandwichBias(keras.layers.Layer):
    """`bias(i, j) = scale * (p_i . p_j)` with sinusoidal positions `p`.

    Chi, Fan, Rudnicky, Ramadge (2023), "Dissecting Transformer Length
    Extrapolation via the Lens of Receptive Field Analysis",
    https://arxiv.org/abs/2212.10356. With `p_n` the `dim`-wide sinusoidal
    encoding of Vaswani et al., frequencies `w_k = 10000^(-2k/dim)`,

        p_i . p_j = sum_{k < dim/2} cos((i - j) w_k),

    a function of `i - j` that decays, with oscillations, as the distance
    grows; the layer computes it from the distance directly. The same bias
    serves every head.

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
        if dim % 2:
            raise ValueError(f"`dim` must be even; received {dim}.")
        self.dim = dim
        self.scale = scale

    def call(self, query, key=None):
        key = query if key is None else key
        distance = ops.cast(
            masking.relative_positions(ops.shape(query)[1], ops.shape(key)[1]), "float32"
        )
        frequencies = ops.power(
            10000.0, -2.0 * ops.arange(self.dim // 2, dtype="float32") / self.dim
        )
        inner = ops.sum(ops.cos(distance[..., None] * frequencies), axis=-1)
        return (self.scale * inner)[None, None]

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "scale": self.scale})
        return config
