"""The shared test harness: every layer gets the same checks by calling
`run_layer_test` once.

`run_layer_test` checks, on the backend selected by KERAS_BACKEND:
- `get_config` / `from_config` round trip;
- a symbolic (KerasTensor) call: output shape and dtype;
- an eager call against an independent reference, when one is given;
- one `fit` step (with `jit_compile=True` on TensorFlow and JAX) leaving
  finite weights that changed and a finite loss;
- `.keras` save and load with identical outputs;
- mixed_float16 and mixed_bfloat16 policies: outputs in the compute dtype,
  finite, and close to the float32 result computed with the same weights.
"""

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
):
    """Runs the standard checks for one layer configuration.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: dict of call argument name -> numpy array (batched); these
            become model inputs.
        expected_output_shape: full output shape for `inputs`.
        call_kwargs: non-tensor call arguments (e.g. `use_causal_mask=True`).
        reference: optional `fn(layer, inputs) -> np.ndarray`, an independent
            implementation (numpy written in the test) reading the layer's
            weights.
        atol: tolerance against the reference and across save/load.
        tmp_path: directory for the `.keras` file.
        mixed_precision_atol: tolerance of half-precision results against
            float32.
    """
    call_kwargs = dict(call_kwargs or {})

    # Config round trip.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    for key, value in init_kwargs.items():
        # Initializers are stored serialized; everything else as given.
        if key in config and not key.endswith("_initializer"):
            assert config[key] == value, (key, config[key], value)

    # Symbolic call.
    symbolic = {
        name: keras.KerasTensor(value.shape, dtype=str(value.dtype))
        for name, value in inputs.items()
    }
    symbolic_output = layer_cls(**init_kwargs)(**symbolic, **call_kwargs)
    assert tuple(symbolic_output.shape) == tuple(expected_output_shape)
    assert symbolic_output.dtype == "float32"

    # Eager call against the reference.
    model = _functional_model(layer, inputs, call_kwargs)
    output = to_numpy(layer(**inputs, **call_kwargs))
    assert output.shape == tuple(expected_output_shape)
    assert np.all(np.isfinite(output))
    np.testing.assert_allclose(to_numpy(model(inputs)), output, atol=atol, rtol=0)
    if reference is not None:
        np.testing.assert_allclose(output, reference(layer, inputs), atol=atol, rtol=0)

    # .keras round trip.
    if tmp_path is not None:
        path = os.path.join(str(tmp_path), f"{layer.name}.keras")
        model.save(path)
        restored = keras.models.load_model(path)
        np.testing.assert_allclose(
            to_numpy(restored(inputs)), output, atol=1e-6, rtol=0
        )
        assert isinstance(restored.get_layer(layer.name), layer_cls)

    # One jit-compiled fit step.
    _run_fit_step(layer_cls, init_kwargs, inputs, call_kwargs)

    # Mixed precision.
    for policy in ("mixed_float16", "mixed_bfloat16"):
        half = layer_cls(**init_kwargs, dtype=policy)
        half(**inputs, **call_kwargs)
        half.set_weights(layer.get_weights())
        half_output = half(**inputs, **call_kwargs)
        output_dtype = keras.backend.standardize_dtype(half_output.dtype)
        assert output_dtype == half.compute_dtype, (policy, output_dtype)
        half_output = to_numpy(keras.ops.cast(half_output, "float32"))
        assert np.all(np.isfinite(half_output)), policy
        np.testing.assert_allclose(half_output, output, atol=mixed_precision_atol, rtol=0)
    return layer


def _run_fit_step(layer_cls, init_kwargs, inputs, call_kwargs):
    layer = layer_cls(**init_kwargs)
    model = _functional_model(layer, inputs, call_kwargs)
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1),
        loss="mse",
        jit_compile=supports_jit(),
    )
    batch = len(next(iter(inputs.values())))
    target_shape = (batch,) + tuple(model.output.shape[1:])
    target = np.random.default_rng(0).normal(size=target_shape).astype("float32")
    history = model.fit(inputs, target, batch_size=batch, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [to_numpy(w) for w in model.trainable_weights]
    assert all(np.all(np.isfinite(w)) for w in after)
    assert any(not np.array_equal(b, a) for b, a in zip(before, after))
