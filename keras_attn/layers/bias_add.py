"""A learned bias on the last axis."""

import keras


@keras.saving.register_keras_serializable(package="keras_attn")
class BiasAdd(keras.layers.Layer):
    """Adds a learned vector `b` to the last axis, `y = x + b` (BERT's masked-LM
    output bias, `cls/predictions/output_bias`).

    Args:
        bias_initializer: initializer of `b`.
        **kwargs: base layer arguments.
    """

    def __init__(self, bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.bias = self.add_weight(
            name="bias", shape=(inputs_shape[-1],), initializer=self.bias_initializer
        )

    def call(self, inputs):
        return inputs + self.bias

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config["bias_initializer"] = keras.initializers.serialize(self.bias_initializer)
        return config
