"""An attention layer called with a key/value cache, one token at a time,
gives what its full causal call gives, for every kind of attention layer."""

import numpy as np
import pytest

import keras_attn
from keras_attn.layers import CacheStep
from keras_attn.layers import KeyValueCache
from tests.harness import to_numpy

LENGTH = 7


def layers():
    return {
        "decoupled key_size, rotary": keras_attn.MultiHeadAttention(
            2, 4, key_size=6, position_encoding="rotary"
        ),
        "xpos": keras_attn.MultiHeadAttention(2, 4, position_encoding="xpos", xpos_scale_base=4),
        "talking heads, 3 key heads, 1 value head": keras_attn.TalkingHeadsAttention(
            2, 4, key_heads=3, value_heads=1, talking_heads_initializer="glorot_uniform"
        ),
        "log-n": keras_attn.MultiHeadAttention(2, 4, log_n_train_length=2),
        "functional relative (NEZHA), clipped at 2": keras_attn.MultiHeadAttention(
            2, 4, position_encoding="functional_relative", max_relative_position=2
        ),
    }


@pytest.mark.parametrize("name", list(layers()))
def test_cached_steps_equal_the_full_causal_call(name):
    layer = layers()[name]
    x = np.random.default_rng(0).normal(size=(2, LENGTH, 8)).astype("float32")
    full = to_numpy(layer(x, use_causal_mask=True))
    key_heads = layer.query_dense.units // layer.key_size
    value_heads = layer.value_dense.units // layer.head_size
    cache = KeyValueCache.empty(2, LENGTH, key_heads, layer.key_size, value_heads, layer.head_size, "float32")
    assert tuple(cache.keys.shape) == (2, LENGTH, key_heads, layer.key_size)
    assert tuple(cache.values.shape) == (2, LENGTH, value_heads, layer.head_size)
    slots = np.arange(LENGTH)
    for position in range(LENGTH):
        written = np.where(slots <= position, slots, -1).astype("int32")
        step = CacheStep(
            slot=np.int32(position), positions=np.array([position], "int32"), key_positions=written
        )
        mask = np.broadcast_to(written >= 0, (2, 1, LENGTH))
        output, cache = layer(
            x[:, position : position + 1], attention_mask=mask, cache=cache, cache_step=step
        )
        np.testing.assert_allclose(to_numpy(output)[:, 0], full[:, position], atol=1e-5, rtol=1e-5)


def test_a_cached_call_needs_its_step():
    layer = keras_attn.MultiHeadAttention(2, 4)
    x = np.zeros((1, 1, 8), "float32")
    layer(x)
    cache = KeyValueCache.empty(1, 3, 2, 4, 2, 4, "float32")
    with pytest.raises(ValueError, match="needs `cache_step`.*attend_projected"):
        layer(x, cache=cache)


def test_attend_projected_equals_attending_to_the_value():
    layer = keras_attn.MultiHeadAttention(2, 4, key_size=3)
    rng = np.random.default_rng(1)
    query = rng.normal(size=(2, 3, 8)).astype("float32")
    value = rng.normal(size=(2, 5, 8)).astype("float32")
    mask = np.ones((2, 3, 5), bool)
    mask[1, :, -2:] = False
    full = to_numpy(layer(query, value=value, attention_mask=mask))
    projected = layer.project_key_value(value)
    np.testing.assert_allclose(
        to_numpy(layer.attend_projected(query, projected, attention_mask=mask)),
        full, atol=1e-6, rtol=1e-6,
    )
    # The mask is applied: unmasked, row 1 differs.
    assert not np.allclose(to_numpy(layer.attend_projected(query, projected))[1], full[1])
