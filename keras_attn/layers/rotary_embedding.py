"""Rotary position embedding (RoPE) and its length-extrapolatable XPOS form."""

import keras
from keras import ops

from keras_attn.layers.rope_scaling import CLIPPED_TYPES
from keras_attn.layers.rope_scaling import LENGTH_DEPENDENT
from keras_attn.layers.rope_scaling import scaled_frequencies
from keras_attn.layers.rope_scaling import standard_rope_scaling
from keras_attn.layers.sinusoids import check_even_width

# Which features a rotated pair holds: `2m, 2m + 1` or `m, m + d/2`.
ROTARY_LAYOUTS = ("interleaved", "half")


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

    `layout="half"` pairs feature `m` with feature `m + d/2` instead of
    `2m + 1` (GPT-NeoX's and Hugging Face LLaMA's `rotate_half`): the same
    rotation of a permuted vector, so the variables keep the checkpoint's
    layout.

    XPOS (Sun et al., 2023, https://arxiv.org/abs/2212.10554), with
    `scale_base` set: the pair `m` of the query at position `n` is also
    scaled by `zeta_m^(n / scale_base)` and the key's by
    `zeta_m^(-n / scale_base)`, `zeta_m = (2m/d + 0.4) / 1.4`, so the score
    decays with `i - j` (XPOS is for causal models).

    With `scaling`, the frequencies `theta_m` are those of a context-extension
    scaling (see `keras_attn.layers.rope_scaling`), and YaRN's attention
    factor multiplies the cosines and sines. `dynamic` and `longrope` read
    the length `T` being encoded: in a full pass the longer of the query and
    key sequences (padding included), in `rotate` `max(positions) + 1`
    unless given; cached keys keep the frequencies of the step that wrote
    them (as in transformers).

    Args:
        max_wavelength: RoPE's `base` (10000 in the paper).
        scale_base: XPOS's scale base (512 in the paper); `None` for plain RoPE.
        scaling: a rope scaling dict (`{"rope_type": "yarn", "factor": 4.0,
            "original_max_position_embeddings": 2048}`), with the names and
            defaults of Hugging Face's `rope_scaling`; `None` for none.
        layout: which features form a rotated pair: `"interleaved"`
            (`2m, 2m + 1`, the paper's and RoFormer's) or `"half"` (`m, m +
            d/2`, LLaMA's); see `ROTARY_LAYOUTS`.
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, heads, key_size)`.
        key: `(batch, key_length, heads, key_size)`.

    Returns the rotated `(query, key)`.
    """

    def __init__(self, max_wavelength=10000, scale_base=None, scaling=None,
                 layout="interleaved", **kwargs):
        super().__init__(**kwargs)
        if layout not in ROTARY_LAYOUTS:
            raise ValueError(
                f"`layout` must be one of {ROTARY_LAYOUTS}; received {layout!r}."
            )
        self.layout = layout
        self.max_wavelength = max_wavelength
        self.scale_base = scale_base
        self.scaling = scaling
        # Checked now, with every default filled in.
        self._scaling = standard_rope_scaling(scaling)
        # No weights: built from the start, so `Model.quantize`, which
        # refuses unbuilt layers, passes over an attention's rotary sublayer
        # (the attention calls `rotate` directly in decoding and ReRoPE).
        self.built = True
        if self._scaling is not None and self._scaling["rope_type"] in CLIPPED_TYPES:
            raise ValueError(
                f"rope_type {self._scaling['rope_type']!r} clips relative positions in "
                "the scores, which no rotation of the queries and keys alone gives; "
                "use the position object `keras_attn.layers.ReRoPE` (or a model's "
                "`rope_scaling`)."
            )

    def call(self, query, key):
        query_positions = ops.arange(ops.shape(query)[1], dtype="int32")
        key_positions = ops.arange(ops.shape(key)[1], dtype="int32")
        query, key = self.rotate_pair(query, key, query_positions, key_positions)
        return self.decay_pair(query, key, query_positions, key_positions)

    def rotate_pair(self, query, key, query_positions, key_positions, tables=None):
        """RoPE's rotation of `query` and `key` at their integer positions,
        no XPOS decay; a `dynamic` scaling reads the length `T` up to the
        later of the two (a full pass: the longer sequence; a cached step:
        its newest position plus one). `tables`: None, or `tables(positions,
        key_size)` of positions that the queries and the keys share, which
        rotate both."""
        check_even_width(self, "key_size (the last axis of query and key)", query.shape[-1])
        if tables is not None:
            return (
                self.rotate(query, query_positions, tables=tables),
                self.rotate(key, key_positions, tables=tables),
            )
        length = None
        if self._scaling is not None and self._scaling["rope_type"] in LENGTH_DEPENDENT:
            # `amax`, not `max`: Keras' torch `max` inspects its result in
            # Python, which breaks `torch.compile`'s graph (compiled blocks).
            length = ops.maximum(ops.amax(query_positions), ops.amax(key_positions)) + 1
        return self.rotate(query, query_positions, length), self.rotate(key, key_positions, length)

    def decay_pair(self, query, key, query_positions, key_positions, cached=False):
        """XPOS's decay of rotated `query` and `key` at their positions
        (unchanged without `scale_base`), centred on the middle of the keys
        in a full pass and on the newest query in a cached step (`cached`),
        so that every key factor is at most 1."""
        if self.scale_base is None:
            return query, key
        if cached:
            centre = query_positions[-1]
            key_positions = ops.minimum(key_positions, centre)
        else:
            centre = ops.shape(key)[1] // 2
        return (
            self.decay(query, query_positions, centre, sign=1.0),
            self.decay(key, key_positions, centre, sign=-1.0),
        )

    def rotate(self, x, positions, length=None, values=False, tables=None):
        """RoPE's rotation of `x`, `(batch, length, heads, size)`, at the
        integer `positions`, `(length,)` or `(batch, length)`; no XPOS
        decay. `length` and `values` are `tables`'s; `tables`: None, or
        `tables(positions, size, length, values)` computed before (then
        `positions`, `length` and `values` are not read), for the same
        result."""
        if tables is None:
            tables = self.tables(positions, x.shape[-1], length, values)
        cos, sin = tables
        even, odd = _pairs(x, self.layout)
        return _unpairs(even * cos - odd * sin, odd * cos + even * sin, x, self.layout)

    def tables(self, positions, size, length=None, values=False):
        """`(cos, sin)` of RoPE's angles `n theta_m` at the integer
        `positions` `n`, `(length,)` or `(batch, length)`, for features of
        width `size`: float32 `(1, length, 1, size / 2)`, or `(batch, length,
        1, size / 2)` for positions of each row, what `rotate` multiplies the
        pairs by. `length` is the number of positions being encoded, read
        by `dynamic` and `longrope` scalings only (default `max(positions) +
        1`; an int `(batch,)` tensor with positions of each row gives each
        row its own); YaRN's
        attention factor multiplies both, unless `values=True` (a
        temperature of the scores that must not scale rotated values)."""
        if length is None and self._scaling is not None and (
            self._scaling["rope_type"] in LENGTH_DEPENDENT
        ):
            length = ops.amax(positions) + 1
        frequencies, attention_factor = scaled_frequencies(
            size, self.max_wavelength, self._scaling, length
        )
        if len(frequencies.shape) == 2:  # a length per row
            frequencies = frequencies[:, None, :]
        # `(length, size / 2)`, or `(batch, length, size / 2)` for positions
        # of each row (`CacheStep.row_positions`).
        angles = ops.cast(positions, "float32")[..., None] * frequencies
        if values:
            attention_factor = 1.0
        if len(angles.shape) == 2:
            angles = angles[None]
        cos = (ops.cos(angles) * attention_factor)[:, :, None, :]
        sin = (ops.sin(angles) * attention_factor)[:, :, None, :]
        return cos, sin

    def decay(self, x, positions, centre, sign):
        """XPOS's scaling of `x`, `(batch, length, heads, size)`: pair `m` at
        position `n` times `zeta_m^(sign (n - centre) / scale_base)`, `sign`
        `+1` for queries and `-1` for keys; the products `q_i . k_j` do not
        depend on `centre`."""
        size = x.shape[-1]
        pairs = ops.arange(size // 2, dtype="float32")
        zeta = (2.0 * pairs / size + 0.4) / 1.4
        offsets = ops.cast(positions, "float32") - ops.cast(centre, "float32")
        scale = ops.power(zeta[None, :], sign * offsets[:, None] / self.scale_base)
        scale = scale[None, :, None, :]
        even, odd = _pairs(x, self.layout)
        return _unpairs(even * scale, odd * scale, x, self.layout)

    def get_config(self):
        config = super().get_config()
        config.update({
            "max_wavelength": self.max_wavelength,
            "scale_base": self.scale_base,
            "scaling": self.scaling,
            "layout": self.layout,
        })
        return config


def _pairs(x, layout="interleaved"):
    """The first and second features of each pair of `x`, float32,
    `(batch, length, heads, size / 2)` each: even and odd features
    (`"interleaved"`), or the first and second halves (`"half"`)."""
    x = ops.cast(x, "float32")
    if layout == "half":
        half = x.shape[-1] // 2
        return x[..., :half], x[..., half:]
    shape = ops.shape(x)
    pairs = ops.reshape(x, (shape[0], shape[1], shape[2], -1, 2))
    return pairs[..., 0], pairs[..., 1]


def _unpairs(first, second, like, layout="interleaved"):
    """The pairs back in the feature order of `layout`, in the shape and
    dtype of `like`."""
    if layout == "half":
        return ops.cast(ops.concatenate([first, second], axis=-1), like.dtype)
    return ops.cast(ops.reshape(ops.stack([first, second], axis=-1), ops.shape(like)), like.dtype)
