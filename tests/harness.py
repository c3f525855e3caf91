"""The shared test harness: every layer gets the same checks by calling
`run_layer_test` once.

`run_layer_test` checks, on the backend selected by KERAS_BACKEND:
- the config round trip (`check_config_round_trip`): every constructor
  argument of the layer's own `__init__` is a key of `get_config()`, the
  given arguments are stored as given, and `from_config(get_config())` has
  the same `get_config()`;
- a symbolic (KerasTensor) call: output shapes and dtypes;
- an eager call, equal to the functional model's and to an independent
  reference when one is given;
- one `fit` step (with `jit_compile=True` on TensorFlow and JAX) leaving
  finite weights that changed and a finite loss; a layer without trainable
  weights gets a jit-compiled `predict` equal to the eager call instead;
- `.keras` save and load with identical outputs;
- mixed_float16 and mixed_bfloat16 policies: outputs in the expected dtype,
  float outputs finite and close to the float32 result computed with the
  same weights, other outputs (boolean masks) equal to it.

Layers may return one tensor or a tuple/list of tensors (e.g.
`RotaryEmbedding`'s rotated query and key); the checks apply to each.
"""

import inspect
import os

import keras
import numpy as np

BACKEND = keras.config.backend()


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def supports_jit():
    # torch's jit_compile goes through torch.compile, far too slow for a unit
    # test on a CPU; Keras' torch path is tested eagerly.
    return BACKEND in ("tensorflow", "jax")


def _functional_model(layer, inputs, call_kwargs):
    symbolic = {
        name: keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name)
        for name, value in inputs.items()
    }
    outputs = layer(**symbolic, **call_kwargs)
    return keras.Model(symbolic, outputs)


def _flat(outputs):
    return [to_numpy(x) for x in keras.tree.flatten(outputs)]


def _is_float(array):
    return np.issubdtype(np.asarray(array).dtype, np.floating) or str(
        np.asarray(array).dtype
    ) == "bfloat16"


def _assert_outputs_close(actual, expected, atol, what):
    """Float outputs within `atol`; any other dtype (masks) exactly equal."""
    assert len(actual) == len(expected), (what, len(actual), len(expected))
    for index, (a, e) in enumerate(zip(actual, expected)):
        message = f"{what}, output {index}"
        if _is_float(e):
            np.testing.assert_allclose(
                np.asarray(a, np.float32), e, atol=atol, rtol=0, err_msg=message
            )
        else:
            np.testing.assert_array_equal(a, e, err_msg=message)


def constructor_arguments(layer_cls):
    """Names of the arguments of `layer_cls.__init__`, without `self`,
    `*args` and `**kwargs`; empty when that `__init__` is Keras' own (a Keras
    layer's config is Keras' business, e.g. `Embedding(weights=...)` is
    deliberately not serialised)."""
    init = layer_cls.__init__
    if init.__module__.startswith("keras."):
        return []
    return [
        parameter.name
        for parameter in inspect.signature(init).parameters.values()
        if parameter.name != "self"
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]


def check_config_round_trip(layer_cls, init_kwargs):
    """Raises AssertionError unless `get_config()` holds every constructor
    argument, stores the given ones as given (initializers are stored
    serialized, so only their presence is checked), and survives
    `from_config` unchanged. Returns the layer."""
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    missing = [name for name in constructor_arguments(layer_cls) if name not in config]
    assert not missing, (
        f"{layer_cls.__name__}.get_config() lacks the constructor argument(s) "
        f"{missing}; from_config could not rebuild the layer."
    )
    for key, value in init_kwargs.items():
        if key.endswith("_initializer"):
            continue
        if hasattr(value, "get_config"):  # an object is stored serialised
            value = keras.saving.serialize_keras_object(value)
        assert key in config and config[key] == value, (
            f"{layer_cls.__name__}.get_config()[{key!r}] is "
            f"{config.get(key, '<absent>')!r}; the layer was built with {value!r}."
        )
    clone_config = layer_cls.from_config(config).get_config()
    assert clone_config == config, (
        f"{layer_cls.__name__}.from_config(get_config()).get_config() differs: "
        f"{clone_config} != {config}."
    )
    return layer


def run_layer_test(
    layer_cls,
    init_kwargs,
    inputs,
    expected_output_shape,
    call_kwargs=None,
    reference=None,
    atol=1e-5,
    tmp_path=None,
    mixed_precision_atol=0.05,
    expected_output_dtype=None,
):
    """Runs the standard checks for one layer configuration.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: dict of call argument name -> numpy array (batched); these
            become model inputs.
        expected_output_shape: full output shape for `inputs`, or a list of
            shapes, one per output, for a layer returning several tensors.
        call_kwargs: non-tensor call arguments (e.g. `use_causal_mask=True`).
        reference: optional `fn(layer, inputs)` returning the expected output
            (or a tuple/list of them), an independent implementation (numpy
            written in the test or in `tests/reference.py`) reading the
            layer's weights.
        atol: tolerance against the reference and across save/load.
        tmp_path: directory for the `.keras` file.
        mixed_precision_atol: tolerance of half-precision results against
            float32.
        expected_output_dtype: `None` when the outputs are in the layer's
            compute dtype (float32, or the mixed policy's float16/bfloat16);
            otherwise the dtype of every output under every policy, e.g.
            `"float32"` for a bias computed in float32, `"bool"` for a mask.
    """
    call_kwargs = dict(call_kwargs or {})
    if isinstance(expected_output_shape, list):
        expected_shapes = [tuple(shape) for shape in expected_output_shape]
    else:
        expected_shapes = [tuple(expected_output_shape)]

    def expected_dtype(layer):
        return expected_output_dtype or layer.compute_dtype

    layer = check_config_round_trip(layer_cls, init_kwargs)

    # Symbolic call.
    symbolic = {
        name: keras.KerasTensor(value.shape, dtype=str(value.dtype))
        for name, value in inputs.items()
    }
    symbolic_layer = layer_cls(**init_kwargs)
    symbolic_outputs = keras.tree.flatten(symbolic_layer(**symbolic, **call_kwargs))
    assert [tuple(x.shape) for x in symbolic_outputs] == expected_shapes
    for x in symbolic_outputs:
        assert x.dtype == expected_dtype(symbolic_layer), ("symbolic", x.dtype)

    # Eager call, functional model and reference.
    model = _functional_model(layer, inputs, call_kwargs)
    eager_outputs = keras.tree.flatten(layer(**inputs, **call_kwargs))
    for x in eager_outputs:
        dtype = keras.backend.standardize_dtype(x.dtype)
        assert dtype == expected_dtype(layer), ("eager", dtype)
    outputs = _flat(eager_outputs)
    assert [x.shape for x in outputs] == expected_shapes
    assert all(np.all(np.isfinite(x)) for x in outputs if _is_float(x))
    _assert_outputs_close(_flat(model(inputs)), outputs, atol, "functional model")
    if reference is not None:
        _assert_outputs_close(outputs, _flat(reference(layer, inputs)), atol, "reference")

    # .keras round trip.
    if tmp_path is not None:
        path = os.path.join(str(tmp_path), f"{layer.name}.keras")
        model.save(path)
        restored = keras.models.load_model(path)
        _assert_outputs_close(_flat(restored(inputs)), outputs, 1e-6, ".keras round trip")
        assert isinstance(restored.get_layer(layer.name), layer_cls)

    # One jit-compiled fit step (or predict, for a layer without weights).
    _run_compiled_step(layer_cls, init_kwargs, inputs, call_kwargs, outputs)

    # Mixed precision.
    for policy in ("mixed_float16", "mixed_bfloat16"):
        half = layer_cls(**init_kwargs, dtype=policy)
        half(**inputs, **call_kwargs)
        half.set_weights(layer.get_weights())
        half_outputs = keras.tree.flatten(half(**inputs, **call_kwargs))
        for x in half_outputs:
            dtype = keras.backend.standardize_dtype(x.dtype)
            assert dtype == expected_dtype(half), (policy, dtype)
        half_outputs = [
            to_numpy(keras.ops.cast(x, "float32")) if _is_float(to_numpy(x)) else to_numpy(x)
            for x in half_outputs
        ]
        assert all(np.all(np.isfinite(x)) for x in half_outputs if _is_float(x)), policy
        _assert_outputs_close(half_outputs, outputs, mixed_precision_atol, policy)
    return layer


def _run_compiled_step(layer_cls, init_kwargs, inputs, call_kwargs, outputs):
    layer = layer_cls(**init_kwargs)
    model = _functional_model(layer, inputs, call_kwargs)
    batch = len(next(iter(inputs.values())))
    if not model.trainable_weights:
        # Nothing to train: check the compiled forward pass instead.
        model.compile(jit_compile=supports_jit())
        predicted = _flat(model.predict(inputs, batch_size=batch, verbose=0))
        _assert_outputs_close(predicted, outputs, 1e-5, "compiled predict")
        return
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1),
        loss="mse",
        jit_compile=supports_jit(),
    )
    rng = np.random.default_rng(0)
    targets = [
        rng.normal(size=(batch,) + tuple(output.shape[1:])).astype("float32")
        for output in model.outputs
    ]
    history = model.fit(
        inputs, targets if len(targets) > 1 else targets[0], batch_size=batch, epochs=1, verbose=0
    )
    assert np.isfinite(history.history["loss"][0])
    after = [to_numpy(w) for w in model.trainable_weights]
    assert all(np.all(np.isfinite(w)) for w in after)
    assert any(not np.array_equal(b, a) for b, a in zip(before, after))
