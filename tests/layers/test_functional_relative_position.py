"""NEZHA's functional relative positions (`FunctionalRelativePosition`,
`MultiHeadAttention(position_encoding="functional_relative")`) against numpy
written from the equations, in the full pass, banded windows and cached
decoding steps."""

import numpy as np
import pytest

import keras_attn
from keras_attn.layers import CacheStep
from keras_attn.layers import KeyValueCache
from tests import reference
from tests.harness import run_layer_test
from tests.harness import to_numpy

RNG = np.random.default_rng(20)


def random(*shape):
    return RNG.normal(size=shape).astype("float32")


def test_the_table_is_the_sinusoid_of_the_row_index(tmp_path):
    query = random(2, 6, 8)
    key = random(2, 4, 8)

    def numpy_reference(layer, inputs):
        return reference.functional_relative_embeddings(6, 4, 2, 10)

    run_layer_test(
        keras_attn.layers.FunctionalRelativePosition,
        {"max_relative_position": 2},
        inputs={"query": query, "key": key},
        call_kwargs={"width": 10},
        expected_output_shape=(6, 4, 10),
        expected_output_dtype="float32",
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_row_zero_is_distance_minus_k_and_not_the_sinusoid_of_the_distance():
    # Row r = clip(j - i, -K, K) + K is the sinusoid of r, as NEZHA's
    # released code and bert4keras compute (the checkpoints' convention):
    # the embedding at j - i = 0 is sin/cos of K, not of 0.
    layer = keras_attn.layers.FunctionalRelativePosition(max_relative_position=3)
    embeddings = to_numpy(layer(np.zeros((1, 1, 1)), width=2))
    np.testing.assert_allclose(embeddings[0, 0], [np.sin(3.0), np.cos(3.0)], atol=1e-6)


def numpy_nezha_layer(layer, query, keep):
    """The whole layer in float64: projections, `reference.nezha_attention`,
    output projection."""
    x = np.asarray(query, np.float64)
    batch, length, _ = x.shape
    q = reference.dense(x, layer.query_dense).reshape(batch, length, -1, layer.key_size)
    k = reference.dense(x, layer.key_dense).reshape(batch, length, -1, layer.key_size)
    v = reference.dense(x, layer.value_dense).reshape(batch, length, -1, layer.head_size)
    attended = reference.nezha_attention(q, k, v, keep, layer.max_relative_position)
    return reference.dense(attended.reshape(batch, length, -1), layer.output_dense)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_numpy(causal, tmp_path):
    length = 7
    query = random(2, length, 8)
    mask = np.ones((2, length, length), bool)
    mask[0, :, length - 2 :] = False  # padding
    mask[1, 1, :] = False  # a query that sees nothing

    def numpy_reference(layer, inputs):
        keep = inputs["attention_mask"].astype(bool)
        if causal:
            keep = keep & np.tril(np.ones((length, length), bool))
        return numpy_nezha_layer(layer, inputs["query"], keep)

    run_layer_test(
        keras_attn.MultiHeadAttention,
        # The fused kernel is allowed but cannot add the relative terms:
        # the einsum path must be taken.
        {"heads": 2, "head_size": 4, "fused_attention": True,
         "position": keras_attn.layers.FunctionalRelative(max_relative_position=2)},
        inputs={"query": query, "attention_mask": mask},
        call_kwargs={"use_causal_mask": causal},
        expected_output_shape=(2, length, 8),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_decoupled_key_and_value_widths_use_a_table_of_each_width():
    layer = keras_attn.MultiHeadAttention(
        2, 4, key_size=6, position_encoding="functional_relative", max_relative_position=3
    )
    query = random(2, 5, 8)
    output = to_numpy(layer(query))
    expected = numpy_nezha_layer(layer, query, np.ones((2, 5, 5), bool))
    np.testing.assert_allclose(output, expected, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_a_banded_window_equals_the_full_pass_under_the_window_mask(causal):
    length, window = 13, 4
    query = random(2, length, 8)
    padding = np.ones((2, length), bool)
    padding[1, -3:] = False
    banded = keras_attn.MultiHeadAttention(
        2, 4, position_encoding="functional_relative", max_relative_position=2,
        attention_window=window,
    )
    output = to_numpy(banded(query, attention_mask=padding[:, None, :], use_causal_mask=causal))
    dense = keras_attn.MultiHeadAttention(
        2, 4, position_encoding="functional_relative", max_relative_position=2
    )
    dense(query)
    dense.set_weights(banded.get_weights())
    keep = padding[:, None, :] & reference.band(length, length, window, causal)[None]
    expected = to_numpy(dense(query, attention_mask=keep))
    np.testing.assert_allclose(output, expected, atol=1e-5)
    np.testing.assert_allclose(output, numpy_nezha_layer(dense, query, keep), atol=1e-5)


def test_cached_steps_in_a_ring_read_the_slots_positions():
    # A ring of 4 slots under a causal window of 4: slot p % 4 holds
    # position p, so slots are out of position order and the relative terms
    # must come from `key_positions`.
    length, window = 9, 4
    layer = keras_attn.MultiHeadAttention(
        2, 4, position_encoding="functional_relative", max_relative_position=2,
        attention_window=window,
    )
    x = random(2, length, 8)
    full = to_numpy(layer(x, use_causal_mask=True))
    cache = KeyValueCache.empty(2, window, 2, 4, 2, 4, "float32")
    held = np.full(window, -1, "int32")
    for position in range(length):
        held[position % window] = position
        step = CacheStep(
            slot=np.int32(position % window),
            positions=np.array([position], "int32"),
            key_positions=held.copy(),
        )
        mask = np.broadcast_to(held >= 0, (2, 1, window))
        output, cache = layer(
            x[:, position : position + 1], attention_mask=mask, cache=cache, cache_step=step
        )
        np.testing.assert_allclose(to_numpy(output)[:, 0], full[:, position], atol=1e-5)


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "64", None])
def test_a_bad_max_relative_position_is_named(value):
    with pytest.raises(ValueError, match=f"max_relative_position.*received {value!r}"):
        keras_attn.MultiHeadAttention(
            2, 4, position_encoding="functional_relative", max_relative_position=value
        )
    with pytest.raises(ValueError, match="max_relative_position"):
        keras_attn.layers.FunctionalRelativePosition(max_relative_position=value)


def test_an_odd_width_is_refused():
    layer = keras_attn.MultiHeadAttention(2, 5, position_encoding="functional_relative")
    with pytest.raises(ValueError, match="must be even.*received 5"):
        layer(random(1, 3, 8))
