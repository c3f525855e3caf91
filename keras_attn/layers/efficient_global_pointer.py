"""Efficient GlobalPointer: span scores with one shared query/key projection."""

import keras
from keras import ops

from keras_attn.layers.global_pointer import GlobalPointer
from keras_attn.layers.global_pointer import mask_spans


@keras.saving.register_keras_serializable(package="keras_attn")
class EfficientGlobalPointer(GlobalPointer):
    """GlobalPointer with one `(q, k)` pair shared by all entity types plus a
    per-type start and end bias (Su, 2022, "Efficient GlobalPointer",
    https://kexue.fm/archives/8877), as bert4keras's `EfficientGlobalPointer`:
    about `2 * head_size * hidden` parameters instead of
    `2 * heads * head_size * hidden`.

    A dense layer maps each token to `p_n` of width `2 * head_size`; `q_n`
    is its even features and `k_n` its odd ones (rotated by RoPE when
    `use_rope`). A second dense layer maps `p_n` to `2 * heads` biases
    `b_n`; type `a` takes `b_n[2a]` as the score of `n` as a span end and
    `b_n[2a + 1]` as a span start:

        s^a[i, j] = q_i . k_j / sqrt(head_size) + (b_j[2a] + b_i[2a + 1]) / 2

    Arguments, call arguments, masking and output are those of
    `GlobalPointer`.

    Example:

    >>> pointer = keras_attn.layers.EfficientGlobalPointer(heads=3, head_size=64)
    >>> logits = pointer(encoder.output)   # (batch, 3, length, length)
    """

    def create_projections(self):
        self.dense = self.projection(self.head_size * 2, "dense")
        self.bias_dense = self.projection(self.heads * 2, "bias_dense")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.bias_dense.build(tuple(input_shape[:-1]) + (2 * self.head_size,))

    def call(self, inputs, mask=None):
        projected = self.dense(inputs)
        # RotaryEmbedding rotates (batch, length, heads, size): one shared head.
        query, key = projected[..., None, ::2], projected[..., None, 1::2]
        if self.use_rope:
            query, key = self.rotary(query, key)
        logits = ops.einsum("bmd,bnd->bmn", query[:, :, 0], key[:, :, 0]) / ops.cast(
            self.head_size**0.5, query.dtype
        )
        bias = ops.transpose(self.bias_dense(projected), (0, 2, 1)) / ops.cast(2, query.dtype)
        logits = logits[:, None] + bias[:, ::2, None, :] + bias[:, 1::2, :, None]
        return mask_spans(logits, mask, self.tril_mask)
