"""The one place where composite layers create their `Dense` sublayers."""

import keras
from keras import ops

from keras_attn import keras_internals
from keras_attn.layers.rms_normalization import RMSNormalization


def store_projection_arguments(
    layer, use_bias, kernel_initializer, bias_initializer, projection_policies
):
    """Stores on `layer` the constructor arguments `make_dense` reads (and
    `projection_config` gives back), the initializers resolved."""
    layer.use_bias = use_bias
    layer.kernel_initializer = keras.initializers.get(kernel_initializer)
    layer.bias_initializer = keras.initializers.get(bias_initializer)
    layer.projection_policies = projection_policies


def make_dense(layer, units, name, activation=None, use_bias=None):
    """A `Dense` sublayer of `layer` with its `use_bias` (or the given
    `use_bias`, where one projection differs from the others), initializers and
    dtype policy. Each sublayer gets its own copy of the initializers, so
    seeded initializers do not give every projection the same weights
    (copied by `clone`: Keras' `serialize` imports TensorFlow on every
    backend where it is installed).

    A sublayer named in `layer.projection_policies` (the quantized
    projections of a saved model, see `projection_config`) gets that policy
    instead, so it is rebuilt with the variables it was saved with."""
    policies = layer.projection_policies or {}
    return keras.layers.Dense(
        units,
        activation=activation,
        use_bias=layer.use_bias if use_bias is None else use_bias,
        kernel_initializer=layer.kernel_initializer.clone(),
        bias_initializer=layer.bias_initializer.clone(),
        dtype=policies.get(name, layer.dtype_policy),
        name=name,
    )


def quantized_projection_policies(layer):
    """`{sublayer name: serialized dtype policy}` of the `Dense` sublayers of
    `layer` that `keras.Model.quantize` has quantized, or None if none is.

    `Model.quantize` quantizes leaf layers only, so a composite layer's
    config must record which of its projections hold int8 (or other
    quantized) variables; otherwise a reloaded `.keras` model would build
    them in float and fail to load their weights."""
    policies = {
        sublayer.name: keras.dtype_policies.serialize(sublayer.dtype_policy)
        for sublayer in keras_internals.direct_sublayers(layer)
        if isinstance(sublayer, keras.layers.Dense) and sublayer.quantization_mode
    }
    return policies or layer.projection_policies or None


def projection_config(layer):
    """The config entries `make_dense` reads, serialized."""
    return {
        "projection_policies": quantized_projection_policies(layer),
        "use_bias": layer.use_bias,
        "kernel_initializer": keras.initializers.serialize(layer.kernel_initializer),
        "bias_initializer": keras.initializers.serialize(layer.bias_initializer),
    }


def query_key_norms(epsilon, scale_offset, dtype):
    """`(query_norm, key_norm)`: RMS norms of the heads, or None and None
    for `epsilon` None."""
    if epsilon is None:
        return None, None
    return tuple(RMSNormalization(epsilon=epsilon, scale_offset=scale_offset, dtype=dtype,
                                  name=name) for name in ("query_norm", "key_norm"))


def split_heads(projected, size):
    """`(batch, length, heads * size)` -> `(batch, length, heads, size)`."""
    shape = ops.shape(projected)
    return keras_internals.reshape(projected, (shape[0], shape[1], -1, size))


def merge_heads(attended, width):
    """`(batch, length, heads, size)` -> `(batch, length, width)`, where
    `width = heads * size` is passed statically (a traced kernel may not
    know it)."""
    shape = ops.shape(attended)
    return keras_internals.reshape(attended, (shape[0], shape[1], width))
