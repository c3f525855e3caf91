"""Efficient GlobalPointer: span scores with one shared query/key projection."""

import keras
from keras import ops

from keras_attn.layers.global_pointer import GlobalPointer
from keras_attn.layers.global_pointer import mask_spans


@keras.saving.register_keras_serializable(package="keras_attn")
class EfficientGlobalPointer(GlobalPointer):
    """GlobalPointer with one `(q, k)` pair shared by all entity types and
    per-type start and end biases (Su, 2022, "Efficient GlobalPointer",
    https://kexue.fm/archives/8877), as bert4keras's.

    A dense layer maps each token to `p_n` of width `2 * head_size`, `q_n` its
    even features and `k_n` its odd ones (RoPE with `use_rope`); a second maps
    `p_n` to `2 * heads` biases `b_n`:

        s^a[i, j] = q_i . k_j / sqrt(head_size) + (b_j[2a] + b_i[2a + 1]) / 2

    Arguments, masking and output are `GlobalPointer`'s.

    Example:

    >>> logits = keras_attn.layers.EfficientGlobalPointer(heads=3, head_size=64)(features)
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
