"""Grouped-query attention (`MultiHeadAttention(key_value_heads=...)`):
equal to multi-head attention whose key/value projections repeat each
key/value head for its query heads, in the full pass, a windowed pass, a
cached step and `attend_projected`; the cache and the config hold the
key/value heads only."""

import numpy as np
import pytest

import keras_attn
from keras_attn.layers.key_value_cache import CacheStep
from tests.harness import to_numpy

HEADS, KEY_VALUE_HEADS, SIZE, WIDTH = 6, 2, 4, 12


def grouped_and_full(**options):
    """A grouped layer and a multi-head one with the same weights, the
    key/value columns of head `g` repeated for query heads `3g .. 3g + 2`."""
    x = np.random.default_rng(0).normal(size=(2, 7, WIDTH)).astype("float32")
    grouped = keras_attn.MultiHeadAttention(
        HEADS, SIZE, key_value_heads=KEY_VALUE_HEADS, **options
    )
    full = keras_attn.MultiHeadAttention(HEADS, SIZE, **options)
    grouped(x), full(x)
    groups = HEADS // KEY_VALUE_HEADS

    def repeat(array):
        shape = array.shape[:-1] + (KEY_VALUE_HEADS, SIZE)
        return np.repeat(array.reshape(shape), groups, axis=-2).reshape(array.shape[:-1] + (-1,))

    for name in ("query_dense", "output_dense"):
        for mine, theirs in zip(getattr(full, name).weights, getattr(grouped, name).weights):
            mine.assign(to_numpy(theirs))
    for name in ("key_dense", "value_dense"):
        for mine, theirs in zip(getattr(full, name).weights, getattr(grouped, name).weights):
            mine.assign(repeat(to_numpy(theirs)))
    return grouped, full, x


@pytest.mark.parametrize("options", [
    dict(),
    dict(position_encoding="rotary", rotary_layout="half", attention_window=3),
    dict(position_encoding="rotary", query_key_norm_epsilon=1e-6),
])
def test_grouped_attention_equals_repeated_heads(options):
    grouped, full, x = grouped_and_full(**options)
    np.testing.assert_allclose(
        to_numpy(grouped(x, use_causal_mask=True)), to_numpy(full(x, use_causal_mask=True)),
        atol=1e-5,
    )


def test_cached_step_and_attend_projected_hold_the_key_value_heads():
    grouped, full, x = grouped_and_full(position_encoding="rotary", rotary_layout="half")
    cache = grouped.empty_cache(2, 7)
    assert tuple(cache.keys.shape) == (2, 7, KEY_VALUE_HEADS, SIZE)
    assert tuple(cache.values.shape) == (2, 7, KEY_VALUE_HEADS, SIZE)
    expected = to_numpy(full(x, use_causal_mask=True))
    slots = np.arange(7)
    for start, end in ((0, 4), (4, 5), (5, 7)):
        written = np.where(slots < end, slots, -1).astype("int32")
        step = CacheStep(
            slot=np.int32(start), positions=np.arange(start, end, dtype="int32"),
            key_positions=written,
        )
        mask = (slots[None, :] <= np.arange(start, end)[:, None])[None].repeat(2, axis=0)
        output, cache = grouped(
            x[:, start:end], attention_mask=mask, cache=cache, cache_step=step
        )
        np.testing.assert_allclose(to_numpy(output), expected[:, start:end], atol=1e-5)
    assert tuple(cache.keys.shape) == (2, 7, KEY_VALUE_HEADS, SIZE)

    plain_grouped, plain_full, _ = grouped_and_full()
    source = np.random.default_rng(1).normal(size=(2, 5, WIDTH)).astype("float32")
    projected = plain_grouped.project_key_value(source)
    assert tuple(projected.keys.shape) == (2, 5, KEY_VALUE_HEADS, SIZE)
    np.testing.assert_allclose(
        to_numpy(plain_grouped.attend_projected(x, projected)),
        to_numpy(plain_full(x, value=source)),
        atol=1e-5,
    )


def test_config_round_trip_keeps_the_options():
    layer = keras_attn.MultiHeadAttention(
        HEADS, SIZE, key_value_heads=KEY_VALUE_HEADS, output_use_bias=False,
        query_key_norm_epsilon=1e-5, position_encoding="rotary", rotary_layout="half",
    )
    x = np.zeros((1, 3, WIDTH), "float32")
    layer(x)
    assert "bias" not in [w.path.split("/")[-1] for w in layer.output_dense.weights]
    restored = keras_attn.MultiHeadAttention.from_config(layer.get_config())
    restored(x)
    assert restored.get_config() == layer.get_config()
    assert [tuple(w.shape) for w in restored.weights] == [tuple(w.shape) for w in layer.weights]


def test_talking_heads_refuse_key_value_heads():
    with pytest.raises(ValueError, match=r"key_value_heads=2 with heads=4"):
        keras_attn.TalkingHeadsAttention(heads=4, head_size=4, key_value_heads=2)
