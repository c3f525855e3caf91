"""ReRoPE and Leaky ReRoPE (`rotary_scaling` of `rope_type` `rerope` /
`leaky_rerope`) in `MultiHeadAttention`: the scores against Su's pairwise
definition in float64 numpy, the identities with plain RoPE, the banded
window, and clear errors (issue 33, item 2). Cached steps against the full
pass: tests/models/test_rope_scaling.py."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers import banded
from tests import reference
from tests.harness import to_numpy

RNG = np.random.default_rng(9)
LENGTH, WIDTH = 9, 12
RE = {"rope_type": "rerope", "window": 3}
LEAKY = {"rope_type": "leaky_rerope", "window": 3, "k": 4}


def attention(scaling, **kwargs):
    layer = keras_attn.layers.MultiHeadAttention(
        heads=2, head_size=8, position_encoding="rotary", rotary_scaling=scaling,
        fused_attention=False, **kwargs,
    )
    layer.build((None, None, WIDTH))
    return layer


def inputs(length=LENGTH):
    return RNG.normal(size=(2, length, WIDTH)).astype("float32")


def same_weights(layer, like):
    layer.set_weights(like.get_weights())
    return layer


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("scaling", [RE, LEAKY], ids=["rerope", "leaky_rerope"])
def test_scores_follow_the_pairwise_definition(scaling, causal):
    layer, x = attention(scaling), inputs()
    output, probabilities = layer(x, use_causal_mask=causal, return_attention_scores=True)
    slope = 1.0 / scaling["k"] if "k" in scaling else 0.0
    expected, expected_probabilities = reference.attention(
        layer, x, use_causal_mask=causal,
        pair_logits=lambda q, k: reference.rerope_logits(q, k, scaling["window"], slope),
    )
    np.testing.assert_allclose(to_numpy(probabilities), expected_probabilities, atol=1e-5)
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)
    # The output without scores (the call a model makes) is the same.
    np.testing.assert_allclose(to_numpy(layer(x, use_causal_mask=causal)), expected, atol=1e-5)


def test_a_window_past_the_length_and_a_slope_of_one_are_plain_rope():
    x = inputs()
    plain = attention(None)
    expected = to_numpy(plain(x))
    for scaling in ({"rope_type": "rerope", "window": LENGTH},
                    {"rope_type": "leaky_rerope", "window": 2, "k": 1}):
        np.testing.assert_allclose(
            to_numpy(same_weights(attention(scaling), plain)(x)), expected, atol=1e-5,
            err_msg=str(scaling),
        )
    # And a window inside the length is not (the test can fail).
    clipped = to_numpy(same_weights(attention(RE), plain)(x))
    assert np.abs(clipped - expected).max() > 1e-3


def test_the_banded_window_computes_the_same_scores():
    """A local window on a long input takes the banded path, whose blocks
    give the kernel their own `i - j`: the clipped scores are unchanged."""
    layer, x = attention(LEAKY, attention_window=4), inputs(16)
    assert banded.layout_for_call(4, False, True, x, x, None, None, None, False) is not None
    expected, _ = reference.attention(
        layer, x, use_causal_mask=True, attention_mask=reference.band(16, 16, 4, True)[None],
        pair_logits=lambda q, k: reference.rerope_logits(q, k, 3, 0.25),
    )
    np.testing.assert_allclose(to_numpy(layer(x, use_causal_mask=True)), expected, atol=1e-5)


def test_the_layer_config_round_trips_the_scaling():
    layer = attention(LEAKY)
    restored = keras_attn.layers.MultiHeadAttention.from_config(layer.get_config())
    restored.build((None, None, WIDTH))
    x = inputs()
    np.testing.assert_allclose(
        to_numpy(same_weights(restored, layer)(x)), to_numpy(layer(x)), atol=1e-6
    )


@pytest.mark.parametrize(
    "scaling, message",
    [
        ({"rope_type": "rerope", "window": 0}, "`window` must be a positive integer.*received 0"),
        ({"rope_type": "rerope", "window": 2.5}, "`window` must be a positive integer.*received 2.5"),
        ({"rope_type": "rerope", "window": True}, "`window` must be a positive integer"),
        ({"rope_type": "rerope"}, r"missing \['window'\]"),
        ({"rope_type": "leaky_rerope", "window": 4, "k": 0.5}, "`k`.*>= 1; received 0.5"),
        ({"rope_type": "leaky_rerope", "window": 4}, r"missing \['k'\]"),
    ],
)
def test_bad_values_are_clear_errors(scaling, message):
    with pytest.raises(ValueError, match=message):
        attention(scaling)


def test_clipped_positions_need_rotary_scores():
    with pytest.raises(ValueError, match="no rotation of the queries and keys alone"):
        keras_attn.layers.RotaryEmbedding(scaling=RE)
    with pytest.raises(ValueError, match="needs position_encoding='rotary' without"):
        keras_attn.layers.MultiHeadAttention(
            heads=2, head_size=8, position_encoding="xpos", rotary_scaling=RE
        )
    with pytest.raises(ValueError, match="needs position_encoding='rotary' without"):
        keras_attn.layers.MultiHeadAttention(
            heads=2, head_size=8, position_encoding="rotary", rotary_value=True,
            rotary_scaling=RE,
        )
