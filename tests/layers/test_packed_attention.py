"""Attention of a packed decoding step on its blocks (`packed.attend`): the
serving engine's layout, every kernel normalisation, against numpy's
masked attention over all the slots."""

import numpy as np
import pytest
from keras import ops

from keras_attn.layers import packed
from keras_attn.layers.dot_product_attention import DotProductAttention
from tests.harness import to_numpy

ROWS, WINDOW, PROMPT_SLOTS, CHUNK, HEADS, SIZE = 3, 4, 5, 4, 2, 8


def layout_mask(rng):
    """The engine's packed layout (`Engine._packed_arguments`): 3 rows'
    windows of 4, 5 prompt slots, the rows' 3 new slots, then a chunk of 4
    new tokens of two prompts; row 1 idle (nothing it can see), some slots
    empty, causality among each prompt's new tokens. Rank 4, `(1, 1,
    queries, slots)`."""
    key_owners = np.concatenate([
        np.repeat(np.arange(ROWS), WINDOW), np.full(PROMPT_SLOTS, ROWS),
        np.arange(ROWS), [ROWS, ROWS, ROWS + 1, ROWS + 1],
    ])
    query_owners = np.concatenate([np.arange(ROWS), [ROWS, ROWS, ROWS + 1, ROWS + 1]])
    valid = rng.random(key_owners.size) < 0.8
    valid[key_owners == 1] = False  # the idle row
    new = key_owners.size - query_owners.size
    mask = (key_owners[None, :] == query_owners[:, None]) & valid[None, :]
    for query in range(ROWS, query_owners.size):  # later new tokens of the chunk
        mask[query, new + query + 1:] = False
    return mask[None, None]


def reference(query, key, value, mask, scale, normalization):
    """Masked attention over every slot in numpy; a row that sees nothing is 0."""
    scores = np.einsum("bqhd,bkhd->bhqk", query, key) * scale
    if normalization == "squared_relu":
        weights = np.where(mask, np.maximum(scores, 0) ** 2, 0)
        weights = weights / np.maximum(mask.sum(-1, keepdims=True), 1)
    else:
        scores = np.where(mask, scores, -np.inf)
        top = np.max(scores, -1, keepdims=True)
        weights = np.where(mask, np.exp(scores - np.where(np.isfinite(top), top, 0)), 0)
        weights = weights / np.maximum(weights.sum(-1, keepdims=True), 1e-30)
    return np.einsum("bhqk,bkhd->bqhd", weights, value)


def share_heads(keys, values):
    """Grouped-query attention's sharing: each key/value head serves
    `HEADS` query heads."""
    return ops.repeat(keys, HEADS, axis=2), ops.repeat(values, HEADS, axis=2)


# (fused, normalization, key/value heads): the softmax on both paths, one
# of them with grouped-query heads shared on the blocks, and squared ReLU.
@pytest.mark.parametrize("fused, normalization, key_value_heads", [
    (None, "softmax", 1), (False, "softmax", HEADS), (False, "squared_relu", HEADS),
])
def test_packed_attention_equals_masked_attention_over_every_slot(
    fused, normalization, key_value_heads,
):
    rng = np.random.default_rng(3)
    mask = layout_mask(rng)
    queries, slots = mask.shape[2:]
    query = rng.normal(size=(1, queries, HEADS, SIZE)).astype("float32")
    key = rng.normal(size=(1, slots, key_value_heads, SIZE)).astype("float32")
    value = rng.normal(size=(1, slots, key_value_heads, SIZE)).astype("float32")
    groups = HEADS // key_value_heads
    shared = (np.repeat(key, groups, axis=2), np.repeat(value, groups, axis=2))
    kernel = DotProductAttention(scale=SIZE ** -0.5, fused=fused, normalization=normalization)
    expected = reference(query, *shared, mask, SIZE ** -0.5, normalization)
    got = to_numpy(packed.attend(
        kernel, packed.PackedRows(ROWS, WINDOW), ops.convert_to_tensor(query),
        ops.convert_to_tensor(key), ops.convert_to_tensor(value), ops.convert_to_tensor(mask),
        share=share_heads if groups > 1 else None,
    ))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert not np.any(got[0, 1])  # the idle row sees nothing
    # The kernel over every slot under the same mask: what the engine ran
    # before, and the reference's own check.
    dense, _ = kernel(*map(ops.convert_to_tensor, (query, *shared, mask)))
    np.testing.assert_allclose(to_numpy(dense), expected, atol=1e-5)
