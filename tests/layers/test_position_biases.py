import math

import numpy as np
import pytest

import keras_attn
from keras_attn.layers.alibi_bias import alibi_slopes
from tests.harness import to_numpy

X = np.zeros((1, 5, 2), "float32")


@pytest.mark.parametrize(
    "heads, expected",
    [
        (8, [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]),
        (16, [2 ** (-0.5 * k) for k in range(1, 17)]),
        # 8 slopes of 8 heads, then every other slope of 16 heads.
        (12, [2.0 ** -k for k in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]),
    ],
)
def test_alibi_slopes(heads, expected):
    np.testing.assert_allclose(alibi_slopes(heads), expected, rtol=1e-12)


def test_alibi_bias_values():
    symmetric = to_numpy(keras_attn.layers.ALiBiBias(8)(X))
    causal = to_numpy(keras_attn.layers.ALiBiBias(8, causal=True)(X))
    assert symmetric.shape == causal.shape == (1, 8, 5, 5)
    # Head 0 has slope 1/2: distance 3 costs 1.5 either way in the symmetric form.
    assert symmetric[0, 0, 4, 1] == symmetric[0, 0, 1, 4] == -1.5
    # Head 2 (slope 1/8), causal form m (j - i).
    assert causal[0, 2, 4, 1] == -3 / 8
    assert causal[0, 2, 1, 4] == 3 / 8
    np.testing.assert_array_equal(np.diagonal(symmetric[0, 5]), 0.0)


def test_kerple_log_and_power_values():
    log = keras_attn.layers.KerpleBias(2, form="log")
    bias = to_numpy(log(X))
    # r1 = r2 = 1 at initialisation: -log(1 + |i - j|).
    np.testing.assert_allclose(bias[0, 1, 0, 3], -math.log(4.0), rtol=1e-6)
    log.r1_variable.assign([0.0, 2.0])
    log.r2_variable.assign([1.0, -1.0])
    bias = to_numpy(log(X))
    softplus = lambda v: math.log1p(math.exp(v))  # noqa: E731
    np.testing.assert_allclose(
        bias[0, 1, 4, 2], -softplus(2.0) * math.log(1 + softplus(-1.0) * 2), rtol=1e-6
    )
    power = keras_attn.layers.KerpleBias(2, form="power")
    power(X)
    power.r2_variable.assign([0.0, 3.0])
    bias = to_numpy(power(X))
    r2 = 2 / (1 + math.exp(-3.0))
    np.testing.assert_allclose(bias[0, 1, 0, 3], -1.0 * 3.0 ** r2, rtol=1e-6)
    np.testing.assert_allclose(bias[0, 0, 0, 3], -3.0, rtol=1e-6)


def test_kerple_parameters_stay_positive():
    layer = keras_attn.layers.KerpleBias(3, form="power")
    layer(X)
    layer.r1_variable.assign([-50.0, 0.0, 50.0])
    layer.r2_variable.assign([-50.0, 0.0, 50.0])
    assert np.all(to_numpy(layer.r1) > 0)
    r2 = to_numpy(layer.r2)
    assert np.all((r2 > 0) & (r2 <= 2))


def test_sandwich_is_the_inner_product_of_sinusoids():
    dim, length = 8, 6
    positions = np.arange(length)[:, None]
    frequencies = 10000.0 ** (-2.0 * np.arange(dim // 2) / dim)
    encoding = np.concatenate([np.sin(positions * frequencies), np.cos(positions * frequencies)], -1)
    expected = 0.5 * encoding @ encoding.T
    bias = to_numpy(keras_attn.layers.SandwichBias(dim=dim, scale=0.5)(np.zeros((1, length, 1))))
    np.testing.assert_allclose(bias[0, 0], expected, atol=1e-5)


def test_sinusoidal_positions_follow_vaswani():
    dim, length = 6, 4
    table = to_numpy(keras_attn.layers.SinusoidalPositionEmbedding(dim)(np.zeros((1, length, 1))))[0]
    for n in range(length):
        for k in range(dim // 2):
            angle = n / 10000 ** (2 * k / dim)
            np.testing.assert_allclose(table[n, 2 * k], math.sin(angle), atol=1e-6)
            np.testing.assert_allclose(table[n, 2 * k + 1], math.cos(angle), atol=1e-6)


@pytest.mark.parametrize(
    "layer",
    [
        keras_attn.layers.ALiBiBias(4, causal=True),
        keras_attn.layers.KerpleBias(4, form="power"),
        keras_attn.layers.SandwichBias(dim=6, scale=2.0),
        keras_attn.layers.SinusoidalPositionEmbedding(6),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_config_round_trip(layer):
    output = to_numpy(layer(X))
    clone = type(layer).from_config(layer.get_config())
    clone(X)
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(to_numpy(clone(X)), output)
