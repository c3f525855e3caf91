"""Attaching a padding mask to a model's sequence outputs."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class OutputMask(keras.layers.Layer):
    """Returns its input unchanged, carrying `mask` as its Keras mask.

    The builder ends every sequence output with one, so that mask-aware layers
    (`GlobalAveragePooling1D`, `LSTM`, a CRF) skip the padding.

    Call arguments:
        inputs: a tensor `(batch, length, ...)`.
        mask: boolean or integer `(batch, length)`, non-zero for real tokens.

    Example:

    ```python
    hidden = keras_attn.layers.OutputMask()(hidden, mask=ops.not_equal(token_ids, 0))
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
