"""The one place where composite layers create their `Dense` sublayers."""

import keras


def make_dense(layer, units, name, activation=None):
    """A `Dense` sublayer of `layer` with its `use_bias`, initializers and
    dtype policy. Each sublayer gets its own copy of the initializers, so
    seeded initializers do not give every projection the same weights."""
    return keras.layers.Dense(
        units,
        activation=activation,
        use_bias=layer.use_bias,
        kernel_initializer=keras.initializers.get(
            keras.initializers.serialize(layer.kernel_initializer)
        ),
        bias_initializer=keras.initializers.get(
            keras.initializers.serialize(layer.bias_initializer)
        ),
        dtype=layer.dtype_policy,
        name=name,
    )


def projection_config(layer):
    """The config entries `make_dense` reads, serialized."""
    return {
        "use_bias": layer.use_bias,
        "kernel_initializer": keras.initializers.serialize(layer.kernel_initializer),
        "bias_initializer": keras.initializers.serialize(layer.bias_initializer),
    }
