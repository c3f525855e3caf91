"""Relative-position biases (ALiBi, KERPLE, Sandwich), their base class and
sinusoidal positions: values against tests/reference.py, and the harness."""

import math

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn
from keras_attn.layers import RelativePositionBias
from tests import reference
from tests.harness import check_config_round_trip
from tests.harness import run_layer_test
from tests.harness import to_numpy

RNG = np.random.default_rng(3)
X = np.zeros((1, 5, 2), "float32")


def alibi_slopes_of(heads):
    # The causal bias at i - j = -1 is m_h (j - i) = m_h.
    return to_numpy(keras_attn.layers.ALiBiBias(heads, causal=True).bias(np.array([-1])))[:, 0]


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
    np.testing.assert_allclose(alibi_slopes_of(heads), expected, rtol=1e-6)


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
    bias = to_numpy(keras_attn.layers.SandwichBias(dim=8, scale=0.5)(np.zeros((1, 6, 1))))
    np.testing.assert_allclose(bias, reference.sandwich_bias(8, 0.5, 6, 6), atol=1e-5)


def test_sinusoidal_positions_follow_vaswani():
    table = to_numpy(keras_attn.layers.SinusoidalPositionEmbedding(6)(np.zeros((1, 4, 1))))[0]
    np.testing.assert_allclose(table, reference.sinusoidal_positions(4, 6), atol=1e-6)


@pytest.mark.parametrize(
    "layer_cls, init_kwargs, argument",
    [
        (keras_attn.layers.SandwichBias, {"dim": 7}, "dim"),
        (keras_attn.layers.SinusoidalPositionEmbedding, {"dim": 5}, "dim"),
    ],
)
def test_odd_sinusoid_width_is_rejected(layer_cls, init_kwargs, argument):
    with pytest.raises(ValueError, match=f"{layer_cls.__name__}: {argument} must be even.*received"):
        layer_cls(**init_kwargs)


def test_kerple_rejects_unknown_form():
    with pytest.raises(ValueError, match="`form` must be one of .*'cubic'"):
        keras_attn.layers.KerpleBias(2, form="cubic")


# The harness, one case per bias configuration. Inputs have different query
# and key lengths where the layer takes both, and batch 2 although the bias
# has batch 1 (it is shared by every sequence).

QUERY = RNG.normal(size=(2, 7, 3)).astype("float32")
KEY = RNG.normal(size=(2, 4, 3)).astype("float32")


@pytest.mark.parametrize("heads, causal", [(4, True), (6, False)])
def test_alibi_through_the_harness(heads, causal, tmp_path):
    slopes = alibi_slopes_of(heads)
    run_layer_test(
        keras_attn.layers.ALiBiBias,
        {"heads": heads, "causal": causal},
        inputs={"query": QUERY, "key": KEY},
        expected_output_shape=(1, heads, 7, 4),
        expected_output_dtype="float32",
        reference=lambda layer, inputs: reference.alibi_bias(slopes, 7, 4, causal),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("form", ["log", "power"])
def test_kerple_through_the_harness(form, tmp_path):
    def numpy_reference(layer, inputs):
        return reference.kerple_bias(
            to_numpy(layer.r1_variable), to_numpy(layer.r2_variable), form, 7, 7
        )

    layer = run_layer_test(
        keras_attn.layers.KerpleBias,
        {"heads": 3, "form": form},
        inputs={"query": QUERY},
        expected_output_shape=(1, 3, 7, 7),
        expected_output_dtype="float32",
        reference=numpy_reference,
        tmp_path=tmp_path,
    )
    # Away from the initial r1 = r2 = 1, where every head is alike.
    layer.r1_variable.assign([0.3, -1.0, 2.0])
    layer.r2_variable.assign([-0.5, 0.7, 1.2])
    np.testing.assert_allclose(to_numpy(layer(QUERY)), numpy_reference(layer, None), atol=1e-5)


def test_sandwich_through_the_harness(tmp_path):
    run_layer_test(
        keras_attn.layers.SandwichBias,
        {"dim": 10, "scale": 0.3},
        inputs={"query": QUERY, "key": KEY},
        expected_output_shape=(1, 1, 7, 4),
        expected_output_dtype="float32",
        reference=lambda layer, inputs: reference.sandwich_bias(10, 0.3, 7, 4),
        tmp_path=tmp_path,
    )


def test_sinusoidal_positions_through_the_harness(tmp_path):
    run_layer_test(
        keras_attn.layers.SinusoidalPositionEmbedding,
        {"dim": 6, "max_wavelength": 300},
        inputs={"inputs": QUERY},
        expected_output_shape=(2, 7, 6),
        reference=lambda layer, inputs: np.broadcast_to(
            reference.sinusoidal_positions(7, 6, base=300.0), (2, 7, 6)
        ),
        tmp_path=tmp_path,
    )


def numpy_t5_buckets(relative, num_buckets, max_distance, bidirectional):
    """T5's buckets of `relative = key - query` positions, written from the
    paper's description (Mesh TensorFlow's `_relative_position_bucket`)."""
    buckets = np.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0) * num_buckets
        distance = np.abs(relative)
    else:
        distance = np.maximum(-relative, 0)
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = exact + (
            np.log(distance / exact) / np.log(max_distance / exact) * (num_buckets - exact)
        ).astype("int64")
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(distance < exact, distance, large)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_bucketed_position_bias_through_the_harness(bidirectional, tmp_path):
    # 9 x 40 positions with 8 buckets up to distance 12: exact, logarithmic
    # and clipped buckets, on both sides of the query when bidirectional.
    query = RNG.normal(size=(2, 9, 3)).astype("float32")
    key = RNG.normal(size=(2, 40, 3)).astype("float32")

    def numpy_reference(layer, inputs):
        relative = np.arange(40)[None, :] - np.arange(9)[:, None]
        buckets = numpy_t5_buckets(relative, 8, 12, bidirectional)
        table = to_numpy(layer.embeddings)
        return np.moveaxis(table[buckets], -1, 0)[None]

    run_layer_test(
        keras_attn.layers.BucketedPositionBias,
        {
            "heads": 3,
            "num_buckets": 8,
            "max_distance": 12,
            "bidirectional": bidirectional,
            "embeddings_initializer": "random_normal",
        },
        inputs={"query": query, "key": key},
        expected_output_shape=(1, 3, 9, 40),
        expected_output_dtype="float32",
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


# The extension point: bias(distance) for any tensor of distances.


@pytest.mark.parametrize(
    "layer",
    [
        keras_attn.layers.ALiBiBias(4),
        keras_attn.layers.ALiBiBias(3, causal=True),
        keras_attn.layers.KerpleBias(3, form="log"),
        keras_attn.layers.KerpleBias(3, form="power"),
        keras_attn.layers.SandwichBias(dim=6, scale=2.0),
    ],
    ids=lambda layer: f"{type(layer).__name__}-{layer.get_config().get('form', '')}",
)
def test_bias_of_any_block_of_distances_equals_the_dense_matrix(layer):
    # A built layer that was never called answers too (no T x T matrix).
    layer.build()
    if layer.weights:
        layer.set_weights([RNG.normal(size=w.shape).astype("float32") for w in layer.weights])
    dense = to_numpy(layer(np.zeros((1, 11, 1)), np.zeros((1, 9, 1))))[0]
    # A (2, 3, 4) block of distances: queries 5..7 against keys 1..4 of two rows.
    rows = np.array([[5], [6], [7]])[None] + np.array([0, 3])[:, None, None]
    columns = np.broadcast_to(np.arange(1, 5), (2, 3, 4))
    rows = np.broadcast_to(rows, (2, 3, 4))
    block = to_numpy(layer.bias(ops.convert_to_tensor(rows - columns, "int32")))
    assert block.dtype == np.float32
    assert block.shape == (dense.shape[0], 2, 3, 4)
    # Equal up to rounding: a backend may vectorise pow differently by shape.
    np.testing.assert_allclose(block, dense[:, rows, columns], rtol=1e-6, atol=0)


@keras.saving.register_keras_serializable(package="tests")
class WindowPenalty(RelativePositionBias):
    """A user's bias, written as the base class documents: `-penalty` on keys
    farther than `reach` from the query, per head."""

    def __init__(self, penalties, reach=2, **kwargs):
        super().__init__(**kwargs)
        self.penalties = list(penalties)
        self.reach = reach

    def bias(self, distance):
        far = ops.cast(ops.greater(ops.abs(distance), self.reach), "float32")
        penalties = ops.convert_to_tensor(self.penalties, "float32")
        return -ops.reshape(penalties, (-1,) + (1,) * len(distance.shape)) * far

    def get_config(self):
        config = super().get_config()
        config.update({"penalties": self.penalties, "reach": self.reach})
        return config


def test_a_subclass_defines_only_bias(tmp_path):
    def numpy_reference(layer, inputs):
        i, j = np.indices((7, 4))
        far = (np.abs(i - j) > 2).astype(np.float64)
        return -np.array([1.0, 3.0])[None, :, None, None] * far[None, None]

    run_layer_test(
        WindowPenalty,
        {"penalties": [1.0, 3.0], "reach": 2},
        inputs={"query": QUERY, "key": KEY},
        expected_output_shape=(1, 2, 7, 4),
        expected_output_dtype="float32",
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_a_subclass_without_bias_is_told_what_to_define():
    with pytest.raises(NotImplementedError, match=r"RelativePositionBias must define `bias\(distance\)`"):
        RelativePositionBias()(X)


# The harness itself must be able to fail.


class ForgetsAnArgument(keras.layers.Layer):
    def __init__(self, size, shift=0.0, **kwargs):
        super().__init__(**kwargs)
        self.size, self.shift = size, shift

    def call(self, inputs):
        return inputs + self.shift

    def get_config(self):
        config = super().get_config()
        config.update({"size": self.size})  # `shift` forgotten
        return config


class DriftsOnRoundTrip(ForgetsAnArgument):
    def get_config(self):
        config = super().get_config()
        config.update({"shift": self.shift + 1.0})
        return config


def test_harness_fails_when_get_config_forgets_an_argument(tmp_path):
    with pytest.raises(AssertionError, match=r"ForgetsAnArgument.get_config\(\) lacks .*\['shift'\]"):
        run_layer_test(
            ForgetsAnArgument,
            {"size": 3},
            inputs={"inputs": QUERY},
            expected_output_shape=QUERY.shape,
            tmp_path=tmp_path,
        )


def test_harness_fails_when_the_config_does_not_round_trip():
    with pytest.raises(AssertionError, match=r"DriftsOnRoundTrip.get_config\(\)\['shift'\] is 1.5"):
        check_config_round_trip(DriftsOnRoundTrip, {"size": 3, "shift": 0.5})
    with pytest.raises(AssertionError, match=r"from_config\(get_config\(\)\).get_config\(\) differs"):
        check_config_round_trip(DriftsOnRoundTrip, {"size": 3})
