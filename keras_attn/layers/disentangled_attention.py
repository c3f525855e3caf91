"""DeBERTa's disentangled attention: content-to-content scores plus
content-to-position and position-to-content terms."""

import math

import keras
import numpy as np
from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.multi_head_attention import MultiHeadAttention
from keras_attn.layers.multi_head_attention import check_positive_integer
from keras_attn.layers.projections import split_heads
from keras_attn.layers.projections import make_dense
from keras_attn.torch_runtime.direct_call import direct_call

# The position terms: content-to-position (the queries against the keys'
# relative positions) and position-to-content (the keys against the
# queries').
POSITION_ATTENTION_TYPES = ("c2p", "p2c")


def log_bucket_positions(distance, buckets, max_distance):
    """DeBERTa's log-bucketed relative positions of the int `distance`
    (`i - j`): exact within `buckets // 2` of zero, then
    `sign * (mid + ceil(log(|d| / mid) / log((max_distance - 1) / mid) *
    (mid - 1)))`, `mid = buckets // 2`, computed in float32 as transformers
    does. Returns int32, of `distance`'s shape; odd in `distance`."""
    distance = ops.cast(distance, "int32")
    mid = buckets // 2
    sign = ops.sign(distance)
    near = ops.logical_and(distance < mid, distance > -mid)
    absolute = ops.where(near, mid - 1, ops.abs(distance))
    # float32 throughout, as transformers' float32 tensors, so that `ceil`
    # rounds where it does; the constants are Python floats (a NumPy scalar
    # breaks a torch.compile graph), the denominator the float32 logarithm.
    ratio = ops.divide(ops.cast(absolute, "float32"), float(mid))
    denominator = float(np.log(np.float32((max_distance - 1) / mid)))
    far = ops.ceil(ops.log(ratio) / denominator * float(mid - 1)) + float(mid)
    far = ops.cast(ops.where(absolute <= mid, mid, far), "int32")
    return ops.where(absolute <= mid, distance, far * sign)


@keras.saving.register_keras_serializable(package="keras_attn")
class DisentangledAttention(MultiHeadAttention):
    """Disentangled self-attention (DeBERTa v2/v3).

    He et al. (2021), "DeBERTa: Decoding-enhanced BERT with Disentangled
    Attention", https://arxiv.org/abs/2006.03654. With `P` the shared table
    of relative-position embeddings (`keras_attn.layers.RelativeEmbedding`,
    `2 * span` rows), `delta(i, j)` the relative position `i - j` (log
    bucketed with `position_buckets`, see `log_bucket_positions`) and
    `r(i, j) = clip(delta(i, j) + span, 0, 2 * span - 1)`, head `n` scores

        s_ij = (q_i . k_j + q_i . Kp_r(i,j) + k_j . Qp_r(i,j)) * scale

    where `Kp = P W_k + b_k` and `Qp = P W_q + b_q` are the table projected by
    this layer's own key and query projections (`share_attention_key=True`,
    DeBERTa v3) or by projections of its own (`position_key_dense`,
    `position_query_dense`); the second term is content-to-position
    (`"c2p"`), the third position-to-content (`"p2c"`), each present when
    `position_attention_types` names it, and `scale = 1 / sqrt(key_size *
    (1 + len(position_attention_types)))`. The position terms are handed to
    the attention kernel as an additive score bias, so the mask, the softmax
    and the fused/einsum choice are `MultiHeadAttention`'s.

    Args:
        heads, head_size, key_size, ...: as `MultiHeadAttention`.
        position_attention_types: a sequence of entries of
            `POSITION_ATTENTION_TYPES` (DeBERTa's `pos_att_type`), at least
            one; another entry is a ValueError naming it.
        span: the number of relative positions the table holds on each
            side: `position_buckets` with buckets, else
            `max_relative_positions`.
        position_buckets: None, or the number of log buckets (DeBERTa's
            `position_buckets`, 256 for v3).
        max_relative_positions: the largest distance the buckets reach
            (DeBERTa's `max_relative_positions`); read with buckets only.
        share_attention_key: project the table with `query_dense` and
            `key_dense` (v3's `share_att_key`); else with the sublayers
            `position_key_dense` (c2p) and `position_query_dense` (p2c),
            which have biases.
        position_dropout: dropout rate applied to the table before it is
            projected, in training (DeBERTa's `pos_dropout`).
        attention_scale: True (the default) is the scale above; a number
            replaces it.

    Call arguments: as `MultiHeadAttention`, self-attention only, where
    `distance_bias` is the `(2 * span, width)` table `P` (required). The
    layer takes no `attention_window`, `position` or
    `key_value_heads`, and does not decode with a cache (ValueErrors naming
    them).

    Example:

    >>> x = keras.random.normal((2, 10, 32))
    >>> table = keras_attn.layers.RelativeEmbedding(8, 32, normalize=True)(x)
    >>> attention = keras_attn.layers.DisentangledAttention(
    ...     4, 8, span=8, position_buckets=8, max_relative_positions=32)
    >>> attention(x, distance_bias=table).shape
    (2, 10, 32)
    """

    def __init__(
        self,
        heads,
        head_size,
        position_attention_types=POSITION_ATTENTION_TYPES,
        span=256,
        position_buckets=None,
        max_relative_positions=512,
        share_attention_key=True,
        position_dropout=0.0,
        attention_scale=True,
        **kwargs,
    ):
        types = position_attention_types
        if isinstance(types, str) or not isinstance(types, (list, tuple)) or not types:
            raise ValueError(
                "`position_attention_types` must be a non-empty list of "
                f"{list(POSITION_ATTENTION_TYPES)}; received {types!r}."
            )
        unknown = [entry for entry in types if entry not in POSITION_ATTENTION_TYPES]
        if unknown or len(set(types)) != len(types):
            raise ValueError(
                "`position_attention_types` entries must be distinct entries of "
                f"{list(POSITION_ATTENTION_TYPES)}; received {list(types)!r}."
            )
        check_positive_integer("span", span)
        check_positive_integer("position_buckets", position_buckets, optional=True)
        check_positive_integer("max_relative_positions", max_relative_positions)
        if position_buckets is not None and max_relative_positions - 1 <= position_buckets // 2:
            raise ValueError(
                f"`max_relative_positions` ({max_relative_positions}) must exceed "
                f"position_buckets // 2 + 1 ({position_buckets // 2 + 1}): the log buckets "
                "span the distances between them."
            )
        for name in ("attention_window", "position", "position_encoding", "key_value_heads"):
            if kwargs.get(name) is not None:
                raise ValueError(
                    f"DisentangledAttention takes no `{name}`; received {kwargs[name]!r}."
                )
        key_size = kwargs.get("key_size") or head_size
        self.position_attention_types = tuple(types)
        if attention_scale is True:
            attention_scale = 1.0 / math.sqrt(key_size * (1 + len(types)))
        super().__init__(heads, head_size, attention_scale=attention_scale, **kwargs)
        self.span = span
        self.position_buckets = position_buckets
        self.max_relative_positions = max_relative_positions
        self.share_attention_key = share_attention_key
        self.position_dropout = position_dropout
        self._position_dropout = keras.layers.Dropout(
            position_dropout, dtype=self.dtype_policy, name="position_dropout"
        )
        self.position_key_dense = self.position_query_dense = None

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if self.share_attention_key:
            return
        width = self.heads * self.key_size
        table_shape = (2 * self.span, query_shape[-1])
        if "c2p" in self.position_attention_types:
            self.position_key_dense = make_dense(self, width, "position_key_dense", use_bias=True)
            self.position_key_dense.build(table_shape)
        if "p2c" in self.position_attention_types:
            self.position_query_dense = make_dense(
                self, width, "position_query_dense", use_bias=True
            )
            self.position_query_dense.build(table_shape)

    def relative_positions(self, query_positions, key_positions, query_length, key_length):
        """The int `(query_length, key_length)` rows `r(i, j)` of the table."""
        distance = masking.relative_positions(
            query_length, key_length, query_positions, key_positions
        )
        if self.position_buckets is not None:
            distance = log_bucket_positions(
                distance, self.position_buckets, self.max_relative_positions
            )
        return ops.clip(distance + self.span, 0, 2 * self.span - 1)

    def position_scores(self, query_heads, key_heads, table, rows, training=None):
        """The float32 `(batch, heads, query_length, key_length)` position
        terms, scaled: c2p `q_i . Kp_r(i,j)` plus p2c `k_j . Qp_r(i,j)`."""
        table = self._position_dropout(table, training=training)[None]
        batch, heads = ops.shape(query_heads)[0], self.heads
        query_length, key_length = ops.shape(query_heads)[1], ops.shape(key_heads)[1]
        scores = None
        if "c2p" in self.position_attention_types:
            projection = self.key_dense if self.share_attention_key else self.position_key_dense
            position_keys = split_heads(direct_call(projection, table), self.key_size)[0]
            by_row = ops.einsum("btnh,rnh->bntr", query_heads, position_keys)
            index = ops.broadcast_to(rows, (batch, heads, query_length, key_length))
            scores = ops.take_along_axis(ops.cast(by_row, "float32"), index, axis=-1)
        if "p2c" in self.position_attention_types:
            projection = self.query_dense if self.share_attention_key else self.position_query_dense
            position_queries = split_heads(direct_call(projection, table), self.key_size)[0]
            by_row = ops.einsum("bsnh,rnh->bnsr", key_heads, position_queries)
            # Key j's row at (i, j) is r(i, j): gathered by key, then transposed.
            index = ops.broadcast_to(
                ops.transpose(rows), (batch, heads, key_length, query_length)
            )
            gathered = ops.take_along_axis(ops.cast(by_row, "float32"), index, axis=-1)
            gathered = ops.transpose(gathered, (0, 1, 3, 2))
            scores = gathered if scores is None else scores + gathered
        return scores * float(self._kernel.scale)

    def _attend(
        self, heads, query_positions, key_positions, mask, attention_bias=None,
        distance_bias=None, training=None, return_scores=False, cache=None, step=None,
        band=None, rotary_tables=None,
    ):
        if cache is not None or query_positions is None:
            raise ValueError(
                f"{self.name}: DisentangledAttention attends within one sequence; it "
                "does not decode with a cache or attend to projected keys."
            )
        if distance_bias is None or len(distance_bias.shape) != 2:
            found = None if distance_bias is None else tuple(distance_bias.shape)
            raise ValueError(
                f"{self.name}: `distance_bias` must be the (2 * span, width) = "
                f"({2 * self.span}, width) table of relative embeddings "
                f"(`RelativeEmbedding`); received {found}."
            )
        query_heads, key_heads = heads[0], heads[1]
        rows = self.relative_positions(
            query_positions, key_positions, ops.shape(query_heads)[1], ops.shape(key_heads)[1]
        )
        bias = self.position_scores(query_heads, key_heads, distance_bias, rows, training)
        if attention_bias is not None:
            bias = bias + ops.cast(attention_bias, "float32")
        return super()._attend(
            heads, query_positions, key_positions, mask, bias, None, training,
            return_scores, cache, step, band, rotary_tables,
        )

    def get_config(self):
        config = super().get_config()
        for name in ("attention_window", "position", "key_value_heads"):
            config.pop(name, None)
        config.update({
            "position_attention_types": list(self.position_attention_types),
            "span": self.span,
            "position_buckets": self.position_buckets,
            "max_relative_positions": self.max_relative_positions,
            "share_attention_key": self.share_attention_key,
            "position_dropout": self.position_dropout,
        })
        return config
