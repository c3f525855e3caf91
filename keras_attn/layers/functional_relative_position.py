"""NEZHA's functional relative positions: a fixed sinusoid per clipped
distance, added to the keys and to the values."""

import keras
from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.sinusoids import check_even_width
from keras_attn.layers.sinusoids import sinusoid_angles


def check_max_relative_position(value):
    """Raises a ValueError naming `value` unless it is a positive integer."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            "`max_relative_position` (the distance where functional relative "
            f"positions are clipped) must be a positive integer; received {value!r}."
        )


@keras.saving.register_keras_serializable(package="keras_attn")
class FunctionalRelativePosition(keras.layers.Layer):
    """Functional relative positions (NEZHA): Shaw et al.'s relative
    embeddings taken from a fixed sinusoid table, added to keys and values.

    For query `i`, key `j`, `K = max_relative_position` and a table `T` of
    `2K + 1` rows:

        a_ij = T[clip(j - i, -K, K) + K]
        e_ij = q_i . (k_j + a_ij) / sqrt(d)        (masked, then softmax_j)
        o_i  = sum_j p_ij (v_j + a_ij)

    Row `r` of `T` is the sinusoid of the row index `r = 0 .. 2K`,
    interleaved: `T[r, 2m] = sin(r / 10000^(2m/d))`,
    `T[r, 2m+1] = cos(r / 10000^(2m/d))`, `d` the per-head width (even). This
    is what Huawei's released NEZHA code and bert4keras
    (`RelativePositionEmbedding` with its `Sinusoidal` initializer) compute,
    and the released checkpoints were trained with it; the paper (Wei et
    al., 2019, "NEZHA: Neural Contextualized Representation for Chinese
    Language Understanding", https://arxiv.org/abs/1909.00204, section 3.2)
    writes the sinusoid of the distance `j - i` itself. The table has no
    weights, so no checkpoint holds it. Every head shares it; the key term
    uses a table of the query/key width, the value term one of the value
    width (one table when they are equal, as in every NEZHA checkpoint).

    `keras_attn.MultiHeadAttention(position=keras_attn.layers.FunctionalRelative())`
    gives this layer to its attention kernel, which adds the two terms on
    its einsum path, in the full pass, in banded windows and in cached
    decoding steps alike: positions enter only through the matrix of
    distances `i - j` each path knows. Memory: the key term is `q . T`,
    `(batch, heads, query_length, 2K + 1)`, gathered at the distances; the
    value term gathers `T` once per call at the distances,
    `(query_length, key_length, d)` (a neighbourhood's in banded windows),
    shared by the batch and the heads, as bert4keras does; nothing of size
    `(batch, heads, query_length, key_length, d)` is formed.

    Args:
        max_relative_position: `K`, the distance where the table is clipped
            (64 in NEZHA's releases and in bert4keras).
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, ...)`; only its length is used.
        key: optional, defaults to `query`; only its length is used.
        width: the table's width (even).

    Returns the float32 embeddings `a_ij`, `(query_length, key_length,
    width)`, for queries and keys at positions `0, 1, ...`.

    Example:

    >>> layer = keras_attn.layers.FunctionalRelativePosition(max_relative_position=2)
    >>> layer(np.zeros((1, 5, 8)), width=4).shape
    (5, 5, 4)
    """

    def __init__(self, max_relative_position=64, **kwargs):
        super().__init__(**kwargs)
        check_max_relative_position(max_relative_position)
        self.max_relative_position = max_relative_position
        # The input's padding mask does not apply to a table over positions.
        self.supports_masking = True

    def compute_mask(self, query, key=None, mask=None):
        return None

    def build(self, query_shape=None, key_shape=None):
        pass

    def call(self, query, key=None, width=None):
        key = query if key is None else key
        distance = masking.relative_positions(ops.shape(query)[1], ops.shape(key)[1])
        return self.embeddings(distance, width)

    def compute_output_spec(self, query, key=None, width=None):
        key = query if key is None else key
        return keras.KerasTensor((query.shape[1], key.shape[1], width), dtype="float32")

    def table(self, width):
        """`T`, float32 `(2K + 1, width)`."""
        check_even_width(self, "the width of functional relative positions", width)
        rows = ops.arange(2 * self.max_relative_position + 1, dtype="int32")
        angles = sinusoid_angles(rows, width)
        return ops.reshape(ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1), (-1, width))

    def rows(self, distance):
        """The table rows of the distances `distance` (`i - j`, int, any
        shape): `clip(j - i, -K, K) + K`."""
        limit = self.max_relative_position
        return ops.clip(-ops.cast(distance, "int32"), -limit, limit) + limit

    def embeddings(self, distance, width):
        """`a_ij` at the distances `distance`: `distance.shape + (width,)`."""
        return ops.take(self.table(width), self.rows(distance), axis=0)

    def key_logits(self, query, distance):
        """`q_i . a_ij`, float32 `(batch, heads, query_length, key_length)`,
        for `query` `(batch, query_length, heads, size)` and the
        `(query_length, key_length)` distances `i - j`."""
        table = ops.cast(self.table(query.shape[-1]), query.dtype)
        by_row = ops.cast(ops.einsum("btnd,rd->bntr", query, table), "float32")
        rows = self.rows(distance)
        shape = ops.shape(by_row)
        rows = ops.broadcast_to(rows[None, None], (shape[0], shape[1]) + tuple(ops.shape(rows)))
        return ops.take_along_axis(by_row, rows, axis=-1)

    def value_term(self, probabilities, distance, width, dtype):
        """`sum_j p_ij a_ij`, `(batch, query_length, heads, width)` in
        `dtype`, for probabilities `(batch, heads, query_length, key_length)`
        and the `(query_length, key_length)` distances `i - j`."""
        embeddings = ops.cast(self.embeddings(distance, width), dtype)
        return ops.einsum("bnts,tsd->btnd", ops.cast(probabilities, dtype), embeddings)

    def get_config(self):
        config = super().get_config()
        config.update({"max_relative_position": self.max_relative_position})
        return config
