"""Soft-capping of logits, as a layer."""

import keras

from keras_attn.layers.dot_product_attention import check_soft_cap
from keras_attn.layers.dot_product_attention import soft_cap


@keras.saving.register_keras_serializable(package="keras_attn")
class LogitSoftCap(keras.layers.Layer):
    """`y = cap * tanh(x / cap)`, elementwise: logits squashed smoothly into
    `(-cap, cap)`.

    Gemma 2's final logit soft-capping (Gemma Team 2024,
    https://arxiv.org/abs/2408.00118); attention scores are capped by
    `MultiHeadAttention(attention_logit_soft_cap=...)`. No weights; the Keras
    mask passes on.

    Args:
        cap: a positive number; ValueError otherwise.
        **kwargs: base layer arguments.

    Example:

    >>> keras_attn.layers.LogitSoftCap(30.0)(np.array([[0.0, 300.0]], "float32"))  # ~[[0, 30]]
    """

    def __init__(self, cap, **kwargs):
        super().__init__(**kwargs)
        check_soft_cap("cap", cap)
        if cap is None:
            raise ValueError("`cap` must be a positive number; received None.")
        self.cap = float(cap)
        self.supports_masking = True

    def call(self, inputs):
        return soft_cap(inputs, self.cap)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "cap": self.cap}
