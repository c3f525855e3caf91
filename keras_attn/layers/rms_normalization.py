"""Root-mean-square normalization that carries Keras masks."""

import keras


@keras.saving.register_keras_serializable(package="keras_attn")
class RMSNormalization(keras.layers.RMSNormalization):
    """`keras.layers.RMSNormalization` that passes its input's Keras mask on.

    `y = x / sqrt(mean(x^2) + epsilon) * scale` over the last axis (Zhang &
    Sennrich 2019, "Root Mean Square Layer Normalization",
    https://arxiv.org/abs/1910.07467; T5's norm). Each position is normalised
    on its own, so the padding mask of the input is the output's. Keras' own
    layer (3.15) does not declare `supports_masking`, so it dropped the mask
    with a warning; T5's blocks use this one so that every inner layer's
    output carries the padding, as in the BERT family.

    Args: those of `keras.layers.RMSNormalization`.

    Example:

    ```python
    token_ids = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(100, 8, mask_zero=True)(token_ids)
    normed = keras_attn.layers.RMSNormalization(epsilon=1e-6)(hidden)
    mean = keras.layers.GlobalAveragePooling1D()(normed)  # over real tokens
    ```
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
