"""Rotary position embedding (RoPE) and its length-extrapolatable XPOS form."""

import keras
from keras import ops

from keras_attn.layers.sinusoids import check_even_width
from keras_attn.layers.sinusoids import sinusoid_angles


@keras.saving.register_keras_serializable(package="keras_attn")
class RotaryEmbedding(keras.layers.Layer):
    """Rotates query and key features by angles proportional to their position.

    RoPE (Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position
    Embedding", https://arxiv.org/abs/2104.09864): for a feature pair
    `(x_{2m}, x_{2m+1})` at position `n`, with `theta_m = base^(-2m/d)`,

        x'_{2m}   = x_{2m} cos(n theta_m) - x_{2m+1} sin(n theta_m)
        x'_{2m+1} = x_{2m+1} cos(n theta_m) + x_{2m} sin(n theta_m)

    so that `q'_i . k'_j` depends on positions only through `i - j`. Pairs are
    adjacent features, as in the paper. `d` is the query/key width
    (`key_size`), which must be even; values are not rotated, so `key_size`
    and `head_size` are independent. `theta_m` are the frequencies of
    `SinusoidalPositionEmbedding` (one helper, `sinusoids.py`).

    XPOS (Sun et al., 2023, "A Length-Extrapolatable Transformer",
    https://arxiv.org/abs/2212.10554), with `scale_base` set: the pair `m` of
    the query at position `n` is also scaled by `zeta_m^(n / scale_base)` and
    the key's by `zeta_m^(-n / scale_base)`, `zeta_m = (2m/d + 0.4) / 1.4`, so
    the score decays with `i - j` (for `i >= j`; XPOS is for causal models).
    Positions are centred before exponentiation; the products are unchanged.

    Args:
        max_wavelength: RoPE's `base` (10000 in the paper).
        scale_base: XPOS's scale base (512 in the paper); `None` for plain RoPE.
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, heads, key_size)`.
        key: `(batch, key_length, heads, key_size)`.

    Returns the rotated `(query, key)`.
    """

    def __init__(self, max_wavelength=10000, scale_base=None, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength
        self.scale_base = scale_base

    def _angles(self, length, size):
        positions = ops.arange(length, dtype="float32")
        return sinusoid_angles(positions, size, self.max_wavelength)  # (length, size / 2)

    def _xpos_scale(self, length, size, sign, centre):
        pairs = ops.arange(size // 2, dtype="float32")
        zeta = (2.0 * pairs / size + 0.4) / 1.4
        positions = ops.arange(length, dtype="float32") - ops.cast(centre, "float32")
        return ops.power(zeta[None, :], sign * positions[:, None] / self.scale_base)

    @staticmethod
    def _rotate(x, angles, scale):
        shape = ops.shape(x)
        pairs = ops.reshape(ops.cast(x, "float32"), (shape[0], shape[1], shape[2], -1, 2))
        even, odd = pairs[..., 0], pairs[..., 1]
        cos = ops.cos(angles)[None, :, None, :]
        sin = ops.sin(angles)[None, :, None, :]
        rotated_even = even * cos - odd * sin
        rotated_odd = odd * cos + even * sin
        if scale is not None:
            scale = scale[None, :, None, :]
            rotated_even, rotated_odd = rotated_even * scale, rotated_odd * scale
        rotated = ops.stack([rotated_even, rotated_odd], axis=-1)
        return ops.cast(ops.reshape(rotated, shape), x.dtype)

    def call(self, query, key):
        size = query.shape[-1]
        check_even_width(self, "key_size (the last axis of query and key)", size)
        query_length, key_length = ops.shape(query)[1], ops.shape(key)[1]
        query_scale = key_scale = None
        if self.scale_base is not None:
            # Both streams share one origin, so q . k still depends on i - j only.
            centre = key_length // 2
            query_scale = self._xpos_scale(query_length, size, 1.0, centre)
            key_scale = self._xpos_scale(key_length, size, -1.0, centre)
        query = self._rotate(query, self._angles(query_length, size), query_scale)
        key = self._rotate(key, self._angles(key_length, size), key_scale)
        return query, key

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "scale_base": self.scale_base})
        return config
