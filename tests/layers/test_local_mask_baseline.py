import keras
import numpy as np
import pytest

import keras_attn
from tests import reference
from tests.harness import run_layer_test
from tests.harness import to_numpy


RNG = np.random.default_rng(11)


@pytest.mark.parametrize(
    "window, causal, blockwise",
    [(4, True, False), (4, False, False), (5, False, False), (3, True, True), (1, True, False)],
)
def test_band_matches_its_definition(window, causal, blockwise):
    layer = keras_attn.LocalMaskBaseline(window, causal=causal, blockwise=blockwise)
    mask = to_numpy(layer(np.zeros((1, 11, 2)), np.zeros((1, 9, 2))))
    assert mask.shape == (1, 1, 11, 9)
    np.testing.assert_array_equal(mask[0, 0], reference.band(11, 9, window, causal, blockwise))
    restored = keras_attn.LocalMaskBaseline.from_config(layer.get_config())
    assert (restored.window, restored.causal, restored.blockwise) == (window, causal, blockwise)


@pytest.mark.parametrize(
    "window, causal, blockwise", [(4, True, False), (5, False, False), (3, True, True)]
)
def test_local_mask_through_the_harness(window, causal, blockwise, tmp_path):
    run_layer_test(
        keras_attn.LocalMaskBaseline,
        {"window": window, "causal": causal, "blockwise": blockwise},
        inputs={
            "query": RNG.normal(size=(2, 11, 3)).astype("float32"),
            "key": RNG.normal(size=(2, 9, 3)).astype("float32"),
        },
        expected_output_shape=(1, 1, 11, 9),
        expected_output_dtype="bool",
        reference=lambda layer, inputs: reference.band(11, 9, window, causal, blockwise)[None, None],
        tmp_path=tmp_path,
    )


def test_mask_builds_at_16k_tokens():
    window, length = 512, 16384
    mask = keras_attn.LocalMaskBaseline(window, causal=True)(np.zeros((1, length, 1)))
    visible = np.minimum(np.arange(length) + 1, window).sum()
    assert int(to_numpy(keras.ops.sum(keras.ops.cast(mask, "int32")))) == visible


@pytest.mark.parametrize("fused_attention", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_window_equals_the_explicit_mask(fused_attention, causal):
    query = RNG.normal(size=(2, 13, 8)).astype("float32")
    padding = np.ones((2, 13, 13), bool)
    padding[1, :, 10:] = False
    windowed = keras_attn.MultiHeadAttention(
        2, 4, attention_window=4, fused_attention=fused_attention
    )
    output = windowed(query, attention_mask=padding, use_causal_mask=causal)
    expected, _ = reference.attention(
        windowed, query, attention_mask=padding & reference.band(13, 13, 4, causal), use_causal_mask=causal
    )
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)
    layer_mask = keras_attn.LocalMaskBaseline(4, causal=causal)(query)
    via_layer = windowed.__class__.from_config(
        dict(windowed.get_config(), attention_window=None)
    )
    via_layer(query)
    via_layer.set_weights(windowed.get_weights())
    combined = keras.ops.logical_and(layer_mask, padding[:, None])
    np.testing.assert_allclose(
        to_numpy(via_layer(query, attention_mask=combined, use_causal_mask=causal)),
        to_numpy(output),
        atol=1e-6,
    )


@pytest.mark.parametrize("causal", [True, False])
def test_receptive_field_of_one_layer_by_perturbation(causal):
    length, window = 16, 4
    query = RNG.normal(size=(1, length, 8)).astype("float32")
    layer = keras_attn.MultiHeadAttention(2, 4, attention_window=window)
    base = to_numpy(layer(query, use_causal_mask=causal))
    allowed = reference.band(length, length, window, causal)
    for j in range(length):
        perturbed = query.copy()
        perturbed[0, j] += 1.0
        changed = np.abs(to_numpy(layer(perturbed, use_causal_mask=causal)) - base).max(-1)[0]
        np.testing.assert_array_equal(changed > 1e-6, allowed[:, j], err_msg=f"key {j}")


def test_blockwise_attention_in_the_layer():
    query = RNG.normal(size=(1, 10, 8)).astype("float32")
    layer = keras_attn.MultiHeadAttention(2, 4, attention_window=3, blockwise_attention=True)
    output = layer(query, use_causal_mask=True)
    expected, _ = reference.attention(
        layer, query, attention_mask=reference.band(10, 10, 3, True, blockwise=True)[None], use_causal_mask=True
    )
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)
