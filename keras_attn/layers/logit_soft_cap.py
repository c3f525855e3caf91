"""Soft-capping of logits, as a layer."""

import keras

from keras_attn.layers.dot_product_attention import check_soft_cap
from keras_attn.layers.dot_product_attention import soft_cap


@keras.saving.register_keras_serializable(package="keras_attn")
class LogitSoftCap(keras.layers.Layer):
    """`y = cap * tanh(x / cap)`, elementwise: logits squashed smoothly into
    `(-cap, cap)` and nearly unchanged where much smaller than `cap`.

    Gemma 2's final logit soft-capping (`final_logit_softcapping`, Gemma
    Team 2024, "Gemma 2: Improving Open Language Models at a Practical
    Size", https://arxiv.org/abs/2408.00118); the attention scores' capping
    is the attention kernel's (`MultiHeadAttention(attention_logit_soft_cap=...)`),
    through the same function. No weights; the input's Keras mask passes on.

    Args:
        cap: a positive number; anything else is a ValueError naming it.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Example:

    >>> layer = keras_attn.layers.LogitSoftCap(30.0)
    >>> layer(np.array([[0.0, 300.0]], "float32"))  # about [[0.0, 30.0]]
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
