"""ConditionalLayerNormalization through the shared harness, against numpy."""

import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import run_layer_test, supports_jit, to_numpy

RNG = np.random.default_rng(11)


def numpy_conditional_layer_norm(layer, inputs):
    x = inputs["inputs"].astype(np.float64)
    condition = inputs["condition"].astype(np.float64)
    weights = {w.name: to_numpy(w).astype(np.float64) for w in layer.weights}
    if "hidden_kernel" in weights:
        condition = np.maximum(condition @ weights["hidden_kernel"], 0.0)  # relu
    scale = weights["gamma"] + condition @ weights["gamma_kernel"]
    shift = weights["beta"] + condition @ weights["beta_kernel"]
    mean = x.mean(-1, keepdims=True)
    variance = x.var(-1, keepdims=True)
    normalized = (x - mean) / np.sqrt(variance + layer.epsilon)
    return normalized * scale[:, None] + shift[:, None]


@pytest.mark.parametrize(
    "init_kwargs",
    [
        {"epsilon": 1e-6, "condition_initializer": "random_normal"},
        {"hidden_size": 3, "hidden_activation": "relu", "condition_initializer": "random_normal"},
    ],
    ids=["direct", "hidden_relu"],
)
def test_conditional_layer_normalization(init_kwargs, tmp_path):
    run_layer_test(
        keras_attn.layers.ConditionalLayerNormalization,
        init_kwargs,
        inputs={
            "inputs": RNG.normal(2.0, 3.0, size=(2, 5, 6)).astype("float32"),
            "condition": RNG.normal(size=(2, 4)).astype("float32"),
        },
        expected_output_shape=(2, 5, 6),
        reference=numpy_conditional_layer_norm,
        tmp_path=tmp_path,
        atol=1e-4,
    )


def test_a_fit_step_trains_the_zero_initialised_condition_weights():
    x = keras.Input((4, 6))
    condition = keras.Input((3,))
    layer = keras_attn.layers.ConditionalLayerNormalization(hidden_size=2)
    model = keras.Model([x, condition], layer(x, condition=condition))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=supports_jit())
    data = [RNG.normal(size=(2, 4, 6)).astype("float32"), RNG.normal(size=(2, 3)).astype("float32")]
    model.fit(data, RNG.normal(size=(2, 4, 6)).astype("float32"), batch_size=2, verbose=0)
    for weight in (layer.gamma_kernel, layer.beta_kernel):
        assert np.abs(to_numpy(weight)).min() > 0, weight.path


def test_zero_initialised_layer_is_the_plain_layer_norm():
    x = RNG.normal(size=(3, 4, 8)).astype("float32")
    plain = keras.layers.LayerNormalization(epsilon=1e-12)
    plain.build(x.shape)
    plain.set_weights([RNG.normal(size=8), RNG.normal(size=8)])
    conditional = keras_attn.layers.ConditionalLayerNormalization(epsilon=1e-12)
    conditional(x, condition=np.zeros((3, 5), "float32"))
    for name in ("gamma", "beta"):
        getattr(conditional, name).assign(to_numpy(getattr(plain, name)))
    expected = to_numpy(plain(x))
    for condition in (RNG.normal(size=(3, 5)), 100 * RNG.normal(size=(3, 5))):
        output = to_numpy(conditional(x, condition=condition.astype("float32")))
        np.testing.assert_allclose(output, expected, atol=1e-5)


def test_condition_must_be_batch_by_size():
    layer = keras_attn.layers.ConditionalLayerNormalization()
    with pytest.raises(ValueError, match=r"\(batch, condition_size\).*\(2, 3, 4\)"):
        layer(np.zeros((2, 3, 4), "float32"), condition=np.zeros((2, 3, 4), "float32"))


def test_hidden_activation_needs_hidden_size():
    with pytest.raises(ValueError, match="hidden_activation='relu'.*needs `hidden_size`"):
        keras_attn.layers.ConditionalLayerNormalization(hidden_activation="relu")
