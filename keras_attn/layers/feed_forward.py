"""The position-wise feed-forward block of a Transformer layer."""

import keras

from keras_attn.torch_runtime.direct_call import direct_call
from keras_attn.layers.projections import make_dense
from keras_attn.layers.projections import projection_config
from keras_attn.layers.projections import store_projection_arguments


@keras.saving.register_keras_serializable(package="keras_attn", name="gelu_approximate")
def gelu_approximate(x):
    """GELU's tanh approximation, as in Hugging Face's `gelu_new`."""
    return keras.activations.gelu(x, approximate=True)


def resolve_activation(name):
    """A Keras activation for `name`; `"gelu"` is the exact erf form."""
    if name == "gelu_approximate":
        return gelu_approximate
    return keras.activations.get(name)


@keras.saving.register_keras_serializable(package="keras_attn")
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward network: `FFN(x) = act(x W_1 + b_1) W_2 + b_2`
    (Vaswani et al., 2017, https://arxiv.org/abs/1706.03762); with `gated=True`
    the hidden layer is `act(x W_1) * (x V)`, `V` the `gate_dense` projection
    (Shazeer, 2020, https://arxiv.org/abs/2002.05202; T5 v1.1).

    Args:
        intermediate_size: width of the hidden layer.
        activation: a Keras activation name or callable; `"gelu"` is the exact
            erf form, `"gelu_approximate"` the tanh one.
        out_dim: output width; defaults to the input width.
        use_bias: whether the projections have biases.
        gated: multiply the activation by a second, linear projection.
        kernel_initializer, bias_initializer: of the projections.
        projection_policies: dtype policies by sublayer name, as
            `keras_attn.MultiHeadAttention` takes them.
        **kwargs: base layer arguments.

    Example:

    >>> keras_attn.layers.FeedForward(intermediate_size=128)(np.zeros((2, 5, 32), "float32")).shape
    (2, 5, 32)
    """

    def __init__(
        self,
        intermediate_size,
        activation="gelu",
        out_dim=None,
        use_bias=True,
        gated=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        projection_policies=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.gated = gated
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.out_dim = out_dim
        store_projection_arguments(
            self, use_bias, kernel_initializer, bias_initializer, projection_policies
        )
        self.supports_masking = True

    def build(self, inputs_shape):
        activation = resolve_activation(self.activation)
        self.intermediate_dense = make_dense(
            self, self.intermediate_size, "intermediate_dense", activation=activation
        )
        self.intermediate_dense.build(inputs_shape)
        if self.gated:
            self.gate_dense = make_dense(self, self.intermediate_size, "gate_dense")
            self.gate_dense.build(inputs_shape)
        self.output_dense = make_dense(self, self.out_dim or inputs_shape[-1], "output_dense")
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_size,))

    def call(self, inputs):
        hidden = direct_call(self.intermediate_dense, inputs)
        if self.gated:
            hidden = hidden * direct_call(self.gate_dense, inputs)
        return direct_call(self.output_dense, hidden)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.out_dim or inputs_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_size": self.intermediate_size,
                "activation": self.activation,
                "out_dim": self.out_dim,
                "gated": self.gated,
                **projection_config(self),
            }
        )
        return config
