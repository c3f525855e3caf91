"""`ConditionalLayerNormalization`: a LayerNorm modulated by a condition."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class ConditionalLayerNormalization(keras.layers.Layer):
    """Layer normalisation over the last axis with a scale and shift that a
    condition modulates (bert4keras's `LayerNormalization(conditional=True)`;
    Su 2019, kexue.fm/archives/7124). For `x` `(batch, ..., features)` and a
    condition `c` `(batch, condition_size)` (ValueError for another rank):

        h = activation(c @ hidden_kernel)        # only with `hidden_size`
        y = (x - mean(x)) / sqrt(var(x) + epsilon) * (gamma + h @ gamma_kernel)
            + beta + h @ beta_kernel

    With zero `gamma_kernel` and `beta_kernel` (the default) it is
    `keras.layers.LayerNormalization`, whose `gamma` and `beta` names it keeps,
    so a plain LayerNorm's checkpoint loads; the condition weights are
    `checkpoint_free_weights`. Statistics in float32; masks pass through.

    Args:
        hidden_size: optional width of a bias-free dense layer applied to the
            condition first (the builder's `layer_norm_cond_hidden_size`).
        hidden_activation: its activation; only with `hidden_size`.
        epsilon: added to the variance.
        condition_initializer: of `gamma_kernel` and `beta_kernel`.
        hidden_initializer: of `hidden_kernel`.
        **kwargs: base layer arguments.

    Example:

    >>> y = keras_attn.layers.ConditionalLayerNormalization()(x, condition=c)
    """

    # No pretrained checkpoint holds the condition's projections.
    checkpoint_free_weights = ("hidden_kernel", "gamma_kernel", "beta_kernel")

    def __init__(
        self,
        hidden_size=None,
        hidden_activation="linear",
        epsilon=1e-3,
        condition_initializer="zeros",
        hidden_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size is not None and (not isinstance(hidden_size, int) or hidden_size < 1):
            raise ValueError(
                f"ConditionalLayerNormalization: `hidden_size` must be a positive "
                f"integer or None; received {hidden_size!r}."
            )
        if hidden_size is None and keras.activations.get(hidden_activation) is not keras.activations.linear:
            raise ValueError(
                f"ConditionalLayerNormalization: `hidden_activation={hidden_activation!r}` "
                "needs `hidden_size` (the condition is used directly without it)."
            )
        self.hidden_size = hidden_size
        self.hidden_activation = hidden_activation
        self.activation = keras.activations.get(hidden_activation)
        self.epsilon = epsilon
        self.condition_initializer = keras.initializers.get(condition_initializer)
        self.hidden_initializer = keras.initializers.get(hidden_initializer)
        self.supports_masking = True

    def build(self, inputs_shape, condition_shape):
        features = inputs_shape[-1]
        if len(condition_shape) != 2 or condition_shape[-1] is None:
            raise ValueError(
                f"{self.name}: `condition` must be (batch, condition_size) with a known "
                f"size; received shape {tuple(condition_shape)}."
            )
        condition_size = condition_shape[-1]
        self.gamma = self.add_weight(name="gamma", shape=(features,), initializer="ones")
        self.beta = self.add_weight(name="beta", shape=(features,), initializer="zeros")
        if self.hidden_size is not None:
            self.hidden_kernel = self.add_weight(
                name="hidden_kernel",
                shape=(condition_size, self.hidden_size),
                initializer=self.hidden_initializer,
            )
            condition_size = self.hidden_size
        self.gamma_kernel = self.add_weight(
            name="gamma_kernel",
            shape=(condition_size, features),
            initializer=self.condition_initializer,
        )
        self.beta_kernel = self.add_weight(
            name="beta_kernel",
            shape=(condition_size, features),
            initializer=self.condition_initializer,
        )

    def call(self, inputs, condition):
        condition = ops.cast(condition, "float32")
        if self.hidden_size is not None:
            condition = self.activation(
                ops.matmul(condition, ops.cast(self.hidden_kernel, "float32"))
            )
        scale = ops.cast(self.gamma, "float32") + ops.matmul(
            condition, ops.cast(self.gamma_kernel, "float32")
        )
        shift = ops.cast(self.beta, "float32") + ops.matmul(
            condition, ops.cast(self.beta_kernel, "float32")
        )
        # (batch, features) -> (batch, 1, ..., 1, features), one axis per inner axis of x.
        for _ in range(len(inputs.shape) - 2):
            scale = ops.expand_dims(scale, 1)
            shift = ops.expand_dims(shift, 1)
        x = ops.cast(inputs, "float32")
        mean = ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
        normalized = (x - mean) * ops.rsqrt(variance + self.epsilon)
        return ops.cast(normalized * scale + shift, self.compute_dtype)

    def compute_output_shape(self, inputs_shape, condition_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_size": self.hidden_size,
                "hidden_activation": self.hidden_activation,
                "epsilon": self.epsilon,
                "condition_initializer": keras.initializers.serialize(self.condition_initializer),
                "hidden_initializer": keras.initializers.serialize(self.hidden_initializer),
            }
        )
        return config
