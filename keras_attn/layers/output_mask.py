"""Attaching a padding mask to a model's sequence outputs."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class OutputMask(keras.layers.Layer):
    """Returns its input unchanged, carrying `mask` as its Keras mask.

    The builder ends every sequence output (`sequence_output`,
    `mlm_logits`) with one, so that layers that honour Keras masks
    (`keras.layers.GlobalAveragePooling1D`, `LSTM`, a CRF) skip the padding
    downstream: the mask is `token_ids != pad_token_id`, or the explicit
    `padding_mask` input.

    Call arguments:
        inputs: a tensor `(batch, length, ...)`.
        mask: boolean or integer `(batch, length)`, true (non-zero) for real
            tokens: the output's Keras mask.

    Example:

    ```python
    token_ids = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(100, 8)(token_ids)
    hidden = keras_attn.layers.OutputMask()(hidden, mask=ops.not_equal(token_ids, 0))
    mean = keras.layers.GlobalAveragePooling1D()(hidden)  # over real tokens
    ```
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        return inputs

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        return ops.cast(mask, "bool")

    def compute_output_shape(self, inputs_shape):
        return inputs_shape
