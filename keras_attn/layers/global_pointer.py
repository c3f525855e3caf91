"""GlobalPointer: multi-head span scores for named-entity recognition."""

import keras
from keras import ops

from keras_attn.layers.dot_product_attention import large_negative
from keras_attn.layers.rotary_embedding import RotaryEmbedding


@keras.saving.register_keras_serializable(package="keras_attn")
class GlobalPointer(keras.layers.Layer):
    """Scores every span `[i, j]` for each of `heads` entity types (Su, 2021,
    "GlobalPointer", https://kexue.fm/archives/8373), as bert4keras's.

    A dense layer maps token `h_n` to `heads` pairs `(q_n^a, k_n^a)` of width
    `head_size` (head `a`'s first `head_size` features are `q`, the rest `k`),
    rotated by `RotaryEmbedding` with `use_rope`:

        s^a[i, j] = q_i^a . k_j^a / sqrt(head_size)

    Padding rows and columns (the Keras mask or `mask`, boolean `(batch,
    length)`) and, with `tril_mask`, spans with `j < i` are
    `large_negative(dtype)`. The output, span logits `(batch, heads, length,
    length)` for `SparseMultilabelCrossEntropy(span_labels=True)`, carries no
    Keras mask; type `a`'s entities are the `(start, end)` with a logit above 0.

    Args:
        heads: number of entity types.
        head_size: width of `q` and `k` (even with `use_rope`).
        use_rope: rotate `q` and `k` by their positions.
        tril_mask: mask the spans with `end < start`.
        use_bias, kernel_initializer: of the dense layer.
        **kwargs: base layer arguments.

    Example:

    >>> logits = keras_attn.layers.GlobalPointer(heads=3, head_size=64)(features)
    """

    def __init__(
        self, heads, head_size, use_rope=True, tril_mask=True, use_bias=True,
        kernel_initializer="lecun_normal", **kwargs,
    ):
        super().__init__(**kwargs)
        self.heads = heads
        self.head_size = head_size
        self.use_rope = use_rope
        self.tril_mask = tril_mask
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True
        self.create_projections()
        self.rotary = RotaryEmbedding(dtype=self.dtype_policy, name="rotary")

    def create_projections(self):
        """Creates the dense layer(s) mapping tokens to queries and keys."""
        self.dense = self.projection(self.heads * self.head_size * 2, "dense")

    def projection(self, units, name):
        return keras.layers.Dense(
            units, use_bias=self.use_bias, kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name=name,
        )

    def build(self, input_shape):
        self.dense.build(input_shape)

    def call(self, inputs, mask=None):
        projected = self.dense(inputs)
        shape = ops.shape(projected)
        projected = ops.reshape(projected, (shape[0], shape[1], self.heads, 2 * self.head_size))
        query, key = projected[..., : self.head_size], projected[..., self.head_size :]
        if self.use_rope:
            query, key = self.rotary(query, key)
        logits = ops.einsum("bmhd,bnhd->bhmn", query, key) / ops.cast(
            self.head_size**0.5, query.dtype
        )
        return mask_spans(logits, mask, self.tril_mask)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.heads, input_shape[1], input_shape[1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "heads": self.heads,
                "head_size": self.head_size,
                "use_rope": self.use_rope,
                "tril_mask": self.tril_mask,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def mask_spans(logits, mask, tril_mask):
    """`logits` `(batch, heads, length, length)` with padding rows and columns
    (`mask`, or None) and, with `tril_mask`, `end < start` set to
    `large_negative(dtype)`."""
    length = ops.shape(logits)[-1]
    keep = None
    if mask is not None:
        mask = ops.cast(mask, "bool")
        keep = ops.logical_and(mask[:, None, :, None], mask[:, None, None, :])
    if tril_mask:
        positions = ops.arange(length)
        ordered = ops.greater_equal(positions[None, :], positions[:, None])[None, None]
        keep = ordered if keep is None else ops.logical_and(keep, ordered)
    if keep is None:
        return logits
    dtype = keras.backend.standardize_dtype(logits.dtype)
    return ops.where(keep, logits, ops.cast(large_negative(dtype), dtype))
