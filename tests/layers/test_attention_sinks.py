"""Attention sinks in the kernel and `MultiHeadAttention`: learned sink
logits (`attention_sinks=True`, gpt-oss's extra softmax column) and sink
tokens beside a window (`attention_sink_tokens`, StreamingLLM's mask),
checked against numpy written here: the full pass (fused, einsum and
banded choices), grouped-query heads, masks, a window and a cached step."""

import numpy as np
import pytest

import keras_attn
from keras_attn.layers.dot_product_attention import DotProductAttention
from keras_attn.layers.key_value_cache import CacheStep
from tests.harness import run_layer_test
from tests.harness import to_numpy

HEADS, KEY_VALUE_HEADS, SIZE, WIDTH, LENGTH = 4, 2, 4, 12, 9


def sink_attention(layer, x, keep):
    """The layer's output in float64 numpy: softmax over each row's kept
    scores and one more column, the head's sink logit, which is then
    dropped; rows without a kept key zero. `keep`: boolean `(batch, query,
    key)`."""
    x = np.asarray(x, np.float64)
    batch, length, _ = x.shape

    def project(dense, size):
        out = x @ to_numpy(dense.kernel).astype(np.float64)
        if dense.bias is not None:
            out = out + to_numpy(dense.bias).astype(np.float64)
        return out.reshape(batch, length, -1, size)

    q = project(layer.query_dense, layer.key_size)
    k = project(layer.key_dense, layer.key_size)
    v = project(layer.value_dense, layer.head_size)
    groups = layer.heads // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(layer.key_size)
    sinks = (
        to_numpy(layer.sink_logits).astype(np.float64) if layer.attention_sinks
        else None
    )
    weights = np.zeros_like(scores)
    for b, h, i in np.ndindex(*scores.shape[:3]):
        kept = keep[b, i]
        if not kept.any():
            continue
        row = scores[b, h, i][kept]
        columns = row if sinks is None else np.append(row, sinks[h])
        exponentials = np.exp(columns - columns.max())
        weights[b, h, i, kept] = exponentials[: len(row)] / exponentials.sum()
    attended = np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, length, -1)
    out = attended @ to_numpy(layer.output_dense.kernel).astype(np.float64)
    if layer.output_dense.bias is not None:
        out = out + to_numpy(layer.output_dense.bias).astype(np.float64)
    return out


def band_with_sinks(length, window, sink_tokens, causal=True):
    """StreamingLLM's mask by loops: `j <= i` and (`i - j < window` or `j < k`)."""
    keep = np.zeros((length, length), bool)
    for i in range(length):
        for j in range(length):
            if causal and j > i:
                continue
            near = i - j < window if causal else abs(i - j) <= window // 2
            keep[i, j] = near or j < sink_tokens
    return keep


def inputs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, LENGTH, WIDTH)).astype("float32")
    padding = np.ones((2, LENGTH), bool)
    padding[1, 6:] = False
    return x, padding


def make_layer(x, **options):
    layer = keras_attn.MultiHeadAttention(HEADS, SIZE, key_value_heads=KEY_VALUE_HEADS, **options)
    layer(x)
    if layer.attention_sinks:
        # Away from their zero initialisation, different per head.
        layer.sink_logits.assign(np.array([1.5, -0.5, 0.0, 3.0], "float32"))
    return layer


@pytest.mark.parametrize("fused", [None, False])
@pytest.mark.parametrize("options, window, sink_tokens", [
    (dict(), None, 0),
    # Windowed: the banded blocks (length 9 > 2 blocks of 3 keys).
    (dict(attention_window=3), 3, 0),
    (dict(attention_window=3, attention_sink_tokens=2), 3, 2),
])
def test_sink_logits_match_numpy(options, window, sink_tokens, fused):
    x, padding = inputs()
    layer = make_layer(x, attention_sinks=True, fused_attention=fused, **options)
    output = layer(x, attention_mask=padding[:, None, :], use_causal_mask=True)
    keep = np.tril(np.ones((LENGTH, LENGTH), bool))[None] & padding[:, None, :]
    if window is not None:
        keep = keep & band_with_sinks(LENGTH, window, sink_tokens)[None]
    np.testing.assert_allclose(to_numpy(output), sink_attention(layer, x, keep), atol=2e-5)


def test_sink_tokens_without_learned_sinks_match_numpy():
    x, _ = inputs()
    layer = make_layer(x, attention_window=2, attention_sink_tokens=3)
    keep = np.broadcast_to(band_with_sinks(LENGTH, 2, 3), (2, LENGTH, LENGTH))
    np.testing.assert_allclose(
        to_numpy(layer(x, use_causal_mask=True)), sink_attention(layer, x, keep), atol=2e-5
    )
    # Bidirectional: the band both ways, and the first positions for every query.
    layer = make_layer(x, attention_window=4, attention_sink_tokens=1)
    keep = np.broadcast_to(band_with_sinks(LENGTH, 4, 1, causal=False), (2, LENGTH, LENGTH))
    np.testing.assert_allclose(to_numpy(layer(x)), sink_attention(layer, x, keep), atol=2e-5)


def test_sinks_take_the_einsum_path_and_change_the_result():
    sinks = np.zeros((HEADS,), "float32")
    assert DotProductAttention().uses_fused_path("float32", None, False)
    assert not DotProductAttention(sink_logits=sinks).uses_fused_path("float32", None, False)
    assert not DotProductAttention(sink_logits=sinks, fused=True).uses_fused_path(
        "float32", None, False
    )
    # A sink at 0 is not "no sink": its column takes exp(0) of the mass.
    x, _ = inputs()
    with_sinks = make_layer(x, attention_sinks=True)
    with_sinks.sink_logits.assign(np.zeros((HEADS,), "float32"))
    plain = keras_attn.MultiHeadAttention(HEADS, SIZE, key_value_heads=KEY_VALUE_HEADS)
    plain(x)
    for mine, theirs in zip(plain.weights, [w for w in with_sinks.weights if "sink" not in w.path]):
        mine.assign(to_numpy(theirs))
    assert np.abs(to_numpy(plain(x)) - to_numpy(with_sinks(x))).max() > 1e-3


def test_fully_masked_rows_are_zero_with_finite_gradients():
    x, _ = inputs()
    layer = make_layer(x, attention_sinks=True, use_bias=False)
    layer.sink_logits.assign(np.full((HEADS,), 30.0, "float32"))
    mask = np.ones((2, LENGTH, LENGTH), bool)
    mask[0, 4] = False  # query 4 of row 0 sees no key
    output = to_numpy(layer(x, attention_mask=mask))
    assert np.all(output[0, 4] == 0.0)
    assert np.all(np.isfinite(output))
    # The kernel alone, scores returned: the row's weights are all zero.
    kernel = DotProductAttention(scale=0.5, sink_logits=np.zeros((HEADS,), "float32"))
    heads = np.random.default_rng(1).normal(size=(2, LENGTH, HEADS, SIZE)).astype("float32")
    attended, scores = kernel(heads, heads, heads, mask[:, None], return_scores=True)
    assert np.all(to_numpy(scores)[0, :, 4] == 0.0)
    assert np.all(to_numpy(attended)[0, 4] == 0.0)
    sums = to_numpy(scores).sum(-1)
    assert np.all(sums[1] < 1.0) and np.all(sums[1] > 0.0)


def test_cached_steps_equal_the_full_pass_on_a_sink_ring():
    """A cache of `k + window` slots, the first `k` kept, the rest a ring,
    stepped one token at a time: each step gives the full pass's rows."""
    x, _ = inputs()
    window, sinks = 3, 2
    layer = make_layer(
        x, attention_sinks=True, attention_window=window, attention_sink_tokens=sinks,
        position_encoding="rotary", rotary_layout="half",
    )
    expected = to_numpy(layer(x, use_causal_mask=True))
    capacity = window + sinks
    cache = layer.empty_cache(2, capacity)
    held = np.full((capacity,), -1, "int32")
    for position in range(LENGTH):
        slot = position if position < sinks else sinks + (position - sinks) % (capacity - sinks)
        held[slot] = position
        step = CacheStep(
            slot=np.int32(slot), positions=np.array([position], "int32"),
            key_positions=held.copy(),
        )
        visible = (held >= 0) & (held <= position) & ((position - held < window) | (held < sinks))
        mask = np.broadcast_to(visible[None, None, :], (2, 1, capacity))
        output, cache = layer(
            x[:, position : position + 1], attention_mask=mask, cache=cache, cache_step=step
        )
        np.testing.assert_allclose(
            to_numpy(output)[:, 0], expected[:, position], atol=2e-5, err_msg=f"position {position}"
        )


def test_layer_harness(tmp_path):
    x, padding = inputs()

    def reference(layer, given):
        keep = np.tril(np.ones((LENGTH, LENGTH), bool))[None] & band_with_sinks(LENGTH, 3, 1)
        return sink_attention(layer, given["query"], np.broadcast_to(keep, (2, LENGTH, LENGTH)))

    run_layer_test(
        keras_attn.MultiHeadAttention,
        dict(heads=HEADS, head_size=SIZE, key_value_heads=KEY_VALUE_HEADS, attention_sinks=True,
             attention_window=3, attention_sink_tokens=1),
        {"query": x},
        (2, LENGTH, WIDTH),
        call_kwargs={"use_causal_mask": True},
        reference=reference,
        tmp_path=tmp_path,
    )


def test_talking_heads_take_sinks_after_mixing():
    x, _ = inputs()
    layer = keras_attn.TalkingHeadsAttention(heads=HEADS, head_size=SIZE, attention_sinks=True)
    layer(x)
    assert tuple(layer.sink_logits.shape) == (HEADS,)
    assert "sink_logits" in layer.checkpoint_free_weights
    assert "pre_softmax_kernel" in layer.checkpoint_free_weights
    _, scores = layer(x, return_attention_scores=True)
    assert np.all(to_numpy(scores).sum(-1) < 1.0)


@pytest.mark.parametrize("options, message", [
    (dict(attention_sinks="yes"), r"`attention_sinks` must be True or False.*received 'yes'"),
    (dict(attention_sinks=True, normalization="squared_relu"), r"squared_relu"),
    (dict(attention_sink_tokens=-1, attention_window=4), r"integer >= 0.*received -1"),
    (dict(attention_sink_tokens=2), r"needs `attention_window`.*attention_window=None"),
    (dict(attention_sink_tokens=2, attention_window=4, blockwise_attention=True),
     r"blockwise_attention=True"),
])
def test_bad_options_are_errors(options, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.MultiHeadAttention(HEADS, SIZE, **options)


def test_kernel_refuses_sinks_without_a_softmax():
    with pytest.raises(ValueError, match=r"squared_relu"):
        DotProductAttention(normalization="squared_relu", sink_logits=np.zeros((2,), "float32"))
