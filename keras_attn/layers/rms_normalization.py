"""Root-mean-square normalization that carries Keras masks."""

import keras


@keras.saving.register_keras_serializable(package="keras_attn")
class RMSNormalization(keras.layers.RMSNormalization):
    """`keras.layers.RMSNormalization` that passes its input's Keras mask on.

    `y = x / sqrt(mean(x^2) + epsilon) * scale` over the last axis (Zhang &
    Sennrich 2019, https://arxiv.org/abs/1910.07467; T5's norm). Each position
    is normalised on its own, so the input's padding mask is the output's
    (Keras' layer drops it).

    `scale=False`: no weights, RoFormer-v2's parameter-free norm.
    `scale_offset=c`: the factor is `c + scale`, `scale` starting at zeros;
    Gemma's `(1 + scale)` with `scale_offset=1.0`, so the variable holds the
    checkpoint's `w`. That form is computed in float32 and cast back, as
    transformers' `GemmaRMSNorm`.

    Args:
        scale: multiply by a learned `scale`.
        scale_offset: a number added to `scale` (needs `scale=True`; ValueError).
        **kwargs: `keras.layers.RMSNormalization`'s (`axis`, `epsilon`) and base
            layer arguments.

    Example:

    ```python
    normed = keras_attn.layers.RMSNormalization(epsilon=1e-6)(hidden)
    ```
    """

    def __init__(self, scale=True, scale_offset=0.0, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(scale_offset, (int, float)) or isinstance(scale_offset, bool):
            raise ValueError(f"`scale_offset` must be a number; received {scale_offset!r}.")
        if scale_offset and not scale:
            raise ValueError(
                f"`scale_offset={scale_offset!r}` is added to the learned scale; it needs "
                "scale=True."
            )
        self.use_scale = scale
        self.scale_offset = float(scale_offset)
        self.supports_masking = True

    def build(self, input_shape):
        if self.use_scale and not self.scale_offset:
            super().build(input_shape)
            return
        if not isinstance(self.axis, (list, tuple)):
            self.axis = [self.axis]
        if self.use_scale:
            self.scale = self.add_weight(
                name="scale", shape=tuple(input_shape[dim] for dim in self.axis),
                initializer="zeros",
            )
        self.built = True

    def call(self, x):
        if self.scale_offset:
            normed = keras.ops.rms_normalization(
                keras.ops.cast(x, "float32"), axis=self.axis, epsilon=self.epsilon
            )
            factor = keras.ops.cast(self.scale, "float32") + self.scale_offset
            return keras.ops.cast(normed * factor, x.dtype)
        if self.use_scale:
            return super().call(x)
        return keras.ops.rms_normalization(x, axis=self.axis, epsilon=self.epsilon)

    def get_config(self):
        return {**super().get_config(), "scale": self.use_scale, "scale_offset": self.scale_offset}
