"""The original Transformer's fixed sinusoidal position encoding."""

import keras
from keras import ops

from keras_attn.layers.sinusoids import check_even_width
from keras_attn.layers.sinusoids import sinusoid_angles


@keras.saving.register_keras_serializable(package="keras_attn")
class SinusoidalPositionEmbedding(keras.layers.Layer):
    """Fixed sinusoidal absolute positions (Vaswani et al., 2017,
    https://arxiv.org/abs/1706.03762), no weights and no maximum length:

        P(n, 2k) = sin(n / max_wavelength^(2k/dim))
        P(n, 2k+1) = cos(n / max_wavelength^(2k/dim))

    Args:
        dim: embedding width (even).
        max_wavelength: the base, 10000 in the paper.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(batch, length, ...)`; only its length is used.
        padding_mask: ignored (accepted as `PositionEmbedding` takes it).
        positions: optional integer `(length,)` or `(batch, length)`, the
            tokens' positions (default `0 .. length - 1`).

    Returns `(batch, length, dim)`.
    """

    def __init__(self, dim, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        check_even_width(self, "dim", dim)
        self.dim = dim
        self.max_wavelength = max_wavelength

    def call(self, inputs, padding_mask=None, positions=None):
        if positions is None:
            positions = ops.arange(ops.shape(inputs)[1], dtype="float32")
        angles = sinusoid_angles(positions, self.dim, self.max_wavelength)
        # `(length, dim)`, or `(batch, length, dim)` for positions of each row.
        table = ops.reshape(
            ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1),
            tuple(ops.shape(positions)) + (self.dim,),
        )
        table = ops.cast(table, self.compute_dtype)
        if len(table.shape) == 2:
            table = table[None]
        return ops.broadcast_to(table, (ops.shape(inputs)[0], ops.shape(inputs)[1], self.dim))

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None, positions_shape=None):
        return (inputs_shape[0], inputs_shape[1], self.dim)

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "max_wavelength": self.max_wavelength})
        return config
