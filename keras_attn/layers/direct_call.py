"""Calling a layer's `call` without Keras' `__call__`, where that is exact."""

import keras

from keras_attn import keras_internals


def direct_call(layer, *args, **kwargs):
    """`layer(*args, **kwargs)`, computed by `layer.call` on torch when the
    layer's dtype policy is not mixed.

    Keras' `Layer.__call__` spends about 0.3 ms of Python per call on torch
    (flattening arguments, dtype checks, name scopes); an eager decoding step
    makes some 150 such calls, so it would cost tens of milliseconds whatever
    the model's size. Without a mixed policy `__call__` changes nothing that
    `call` computes on a built layer (no autocasting), so calling `call` is
    exact. On TensorFlow and JAX the decoding loop is traced once, and under
    a mixed policy autocasting matters: there `__call__` is used. A quantized
    layer (`model.quantize`) is computed by its `quantized_call`, as
    `__call__` would.
    """
    policy = layer.dtype_policy
    if (
        keras.config.backend() == "torch"
        and layer.built
        and policy.compute_dtype == policy.variable_dtype
    ):
        if policy.quantization_mode is not None:
            return keras_internals.quantized_call(layer, *args, **kwargs)
        return layer.call(*args, **kwargs)
    return layer(*args, **kwargs)


def keras_call(layer, *args, **kwargs):
    """`layer(*args, **kwargs)` through Keras' `__call__`: how the full pass
    calls a layer (on symbolic tensors it records the functional graph)."""
    return layer(*args, **kwargs)


def layer_caller(decoding):
    """How a pass calls its layers: `direct_call` in a decoding step,
    `keras_call` in the full pass."""
    return direct_call if decoding else keras_call
