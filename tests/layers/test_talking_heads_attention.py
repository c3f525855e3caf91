import numpy as np
import pytest

import keras_attn
from tests import reference
from tests.harness import run_layer_test, to_numpy

RNG = np.random.default_rng(99)


def random(*shape):
    return RNG.normal(size=shape).astype("float32")


def mixing(layer):
    return (
        to_numpy(layer.pre_softmax_kernel).astype(np.float64),
        to_numpy(layer.post_softmax_kernel).astype(np.float64),
    )


@pytest.mark.parametrize(
    "init_kwargs",
    [
        {"heads": 4, "head_size": 3},
        {"heads": 4, "head_size": 3, "key_size": 5, "key_heads": 2, "value_heads": 6},
    ],
    ids=["square", "h_k-h-h_v"],
)
def test_layer_harness(init_kwargs, tmp_path):
    query, value = random(2, 5, 8), random(2, 6, 8)
    mask = np.ones((2, 5, 6), bool)
    mask[0, :, 4:] = False
    mask[1, 2, :] = False
    # Random mixing so that the check does not reduce to plain attention.
    init_kwargs = dict(init_kwargs, talking_heads_initializer="glorot_uniform")

    def numpy_reference(layer, inputs):
        pre, post = mixing(layer)
        return reference.attention(
            layer,
            inputs["query"],
            inputs["value"],
            attention_mask=inputs["attention_mask"],
            pre_softmax=pre,
            post_softmax=post,
        )[0]

    run_layer_test(
        keras_attn.TalkingHeadsAttention,
        init_kwargs,
        inputs={"query": query, "value": value, "attention_mask": mask},
        expected_output_shape=(2, 5, 8),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_parameter_count():
    d_in, heads, key_heads, value_heads, head_size, key_size = 8, 4, 2, 6, 3, 5
    layer = keras_attn.TalkingHeadsAttention(
        heads, head_size, key_size=key_size, key_heads=key_heads, value_heads=value_heads
    )
    layer(random(1, 4, d_in))
    expected = (
        2 * (d_in + 1) * key_heads * key_size
        + (d_in + 1) * value_heads * head_size
        + (value_heads * head_size + 1) * d_in
        + key_heads * heads
        + heads * value_heads
    )
    assert layer.count_params() == expected


def test_identity_initialisation_equals_multi_head_attention():
    query = random(2, 6, 8)
    mask = np.ones((2, 6, 6), bool)
    mask[1, :, 5:] = False
    bias = random(1, 4, 6, 6)
    talking = keras_attn.TalkingHeadsAttention(4, 2, key_size=3)
    plain = keras_attn.MultiHeadAttention(4, 2, key_size=3)
    talking(query)
    plain(query)
    for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
        getattr(plain, name).set_weights(getattr(talking, name).get_weights())
    np.testing.assert_allclose(
        to_numpy(talking(query, attention_mask=mask, attention_bias=bias)),
        to_numpy(plain(query, attention_mask=mask, attention_bias=bias)),
        atol=1e-5,
    )
    # Non-identity mixing really changes the result.
    talking.pre_softmax_kernel.assign(random(4, 4))
    assert (
        np.abs(to_numpy(talking(query)) - to_numpy(plain(query))).max() > 1e-3
    )


def test_bias_is_added_after_the_first_mixing():
    query = random(1, 5, 8)
    bias = random(1, 3, 5, 5)
    layer = keras_attn.TalkingHeadsAttention(
        3, 4, key_heads=2, value_heads=2, talking_heads_initializer="glorot_uniform"
    )
    output, weights = layer(
        query, attention_bias=bias, use_causal_mask=True, return_attention_scores=True
    )
    pre, post = mixing(layer)
    expected, expected_weights = reference.attention(
        layer,
        query,
        attention_bias=bias,
        use_causal_mask=True,
        pre_softmax=pre,
        post_softmax=post,
    )
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)
    assert tuple(weights.shape) == (1, 2, 5, 5)


def test_fully_masked_rows_give_exact_zeros():
    query = random(2, 4, 8)
    mask = np.ones((2, 4, 4), bool)
    mask[0, 1, :] = False
    layer = keras_attn.TalkingHeadsAttention(
        2, 4, use_bias=False, talking_heads_initializer="glorot_uniform"
    )
    output = to_numpy(layer(query, attention_mask=mask))
    assert np.all(output[0, 1] == 0.0)
    assert np.abs(output[0, 0]).sum() > 0


def test_invalid_head_counts_are_reported():
    with pytest.raises(ValueError, match="key_heads"):
        keras_attn.TalkingHeadsAttention(2, 4, key_heads=0)
    with pytest.raises(ValueError, match="value_heads"):
        keras_attn.TalkingHeadsAttention(2, 4, value_heads=1.5)


def test_fused_attention_is_refused_clearly():
    with pytest.raises(ValueError, match="cannot mix scores across heads; received fused_attention=True"):
        keras_attn.TalkingHeadsAttention(2, 4, fused_attention=True)
    # False is accepted (it is in the config, so from_config passes it).
    layer = keras_attn.TalkingHeadsAttention(2, 4, fused_attention=False)
    assert layer.get_config()["fused_attention"] is False
    keras_attn.TalkingHeadsAttention.from_config(layer.get_config())
