"""Banded local attention: only the blocks of the score matrix a window can reach.

With `attention_window=w` a query `i` sees keys in a band around `i` (see
`masking.local_mask`). Instead of a `(length x length)` score matrix masked
down to the band, the sequence is cut into blocks of `block_size` positions;
query block `c` is paired with the key blocks `c + o` for a few offsets `o`,
chosen so that every key of the band lies in one of them:

- causal sliding window (`i - w < j <= i`): blocks of `w`, offsets `(-1, 0)`;
- blockwise causal (XPOS: `j <= i` in the query's block or the one before):
  blocks of `w`, offsets `(-1, 0)`, which is that definition exactly;
- bidirectional (`|i - j| <= w // 2`): blocks of `max(w // 2, 1)`, offsets
  `(-1, 0, 1)`.

Query `i = c B + q` and the `K`-th key of its neighbourhood,
`j = (c + o_min) B + K`, are `i - j = q - K - o_min B` apart whatever the
block `c`, so the band inside a neighbourhood is one static `(B, n B)` matrix.
Blocks are folded into the batch axis, so the attention kernel
(`dot_product_attention.DotProductAttention`, passed to `attend` as a
callable), which works on `(batch, length, heads, size)` tensors, runs on them
unchanged: its fused and einsum paths, log-n scaling and talking heads' mixing.
Memory and time are linear in the sequence length: `length x n B` scores.

Keys beyond either end of the sequence (padding to whole blocks) are masked,
so the result equals the dense masked computation up to float reordering.
"""

import collections

from keras import ops

from keras_attn import keras_internals
from keras_attn.concrete import static_dimension
from keras_attn.layers import masking
from keras_attn.layers.relative_position_bias import gather_distance_bias

BandLayout = collections.namedtuple("BandLayout", ["block_size", "offsets"])


def band_layout(window, causal, blockwise=False):
    """The `BandLayout` covering the band of `masking.local_mask`."""
    if causal or blockwise:
        return BandLayout(window, (-1, 0))
    return BandLayout(max(window // 2, 1), (-1, 0, 1))


def layout_for_call(
    window, blockwise, causal, query, key, attention_mask, attention_bias, distance_bias,
    return_scores,
):
    """The `BandLayout` for a call of an attention layer with
    `attention_window=window` on `query`, `key` `(batch, length, features)`,
    or None where the call must take the dense masked path (same numbers):
    no window, cross-attention, a per-pair mask or bias, returned scores, or
    a sequence too short to gain.
    """
    if window is None or attention_bias is not None or return_scores:
        return None
    if distance_bias is not None and distance_bias.shape[0] != 1:
        return None
    if attention_mask is not None and not masking.is_key_mask(attention_mask):
        return None
    # A symbolic length (JAX export) is unknown here: banded, as for None.
    length = static_dimension(query.shape[1])
    if query is not key and (length is None or length != static_dimension(key.shape[1])):
        return None
    layout = band_layout(window, causal, blockwise=blockwise)
    if length is not None and length <= keys_per_query(layout):
        return None
    return layout


def full_pass_attention(
    layer, causal, query, key, attention_mask, query_mask, key_mask, attention_bias,
    distance_bias, return_scores, training,
):
    """`(mask, band)` for a full pass of `layer` (a `MultiHeadAttention`):
    the merged mask of the dense path and None, or, where `layout_for_call`
    bands the call, None and a function of the `(query, key, value)` heads
    attending on the blocks (`attend`). Sink tokens take the dense path (the
    blocks have no room for them)."""
    layout = None
    if not layer.attention_sink_tokens:
        layout = layout_for_call(
            layer.attention_window, layer.blockwise_attention, causal, query, key,
            attention_mask, attention_bias, distance_bias, return_scores,
        )
    if layout is None:
        return masking.merge_attention_masks(
            attention_mask=attention_mask, query_mask=query_mask, key_mask=key_mask,
            use_causal_mask=causal, query_length=ops.shape(query)[1],
            key_length=ops.shape(key)[1], attention_window=layer.attention_window,
            blockwise=layer.blockwise_attention, sink_tokens=layer.attention_sink_tokens,
        ), None

    def band(query_heads, key_heads, value_heads):
        return attend(
            layer._kernel, layout, layer.attention_window, layer.blockwise_attention, causal,
            query_heads, key_heads, value_heads, attention_mask, query_mask, key_mask,
            distance_bias, training,
        )

    return None, band


def attend(
    kernel, layout, window, blockwise, causal, query, key, value,
    attention_mask=None, query_mask=None, key_mask=None, distance_bias=None, training=None,
):
    """Attention within the window, computed on blocks by `kernel`.

    `kernel(query, key, value, mask, bias, training)` is the attention kernel
    (`DotProductAttention`); `query`, `key`, `value` are
    `(batch, length, heads, size)` heads; `layout` comes from
    `layout_for_call`. The masks are those of `masking.merge_attention_masks`
    (`attention_mask` per key). `distance_bias`, a `(1, heads, 2 length - 1)`
    bias by distance (see `MultiHeadAttention`), is added as the
    `(1, heads, block_size, len(offsets) * block_size)` bias of a
    neighbourhood, the same for every block since `i - j` is; the kernel gets
    that neighbourhood's `i - j` as its `distance` (NEZHA's functional
    relative positions). Returns
    `(batch, length, heads, head_size)`.
    """
    shape = ops.shape(query)
    batch, length = shape[0], shape[1]
    everything = ops.ones((batch, length), "bool")
    # Merged by the one merging routine, then reduced to per-position vectors:
    # per key for keys, per query for queries.
    keys = masking.merge_attention_masks(attention_mask=attention_mask, key_mask=key_mask)
    queries = masking.merge_attention_masks(query_mask=query_mask)
    key_valid = everything if keys is None else ops.logical_and(everything, keys[:, 0, 0, :])
    query_valid = (
        everything if queries is None else ops.logical_and(everything, queries[:, 0, :, 0])
    )
    mask = blocked_mask(layout, window, causal, blockwise, query_valid, key_valid, length)
    query_layout = BandLayout(layout.block_size, (0,))
    query = fold_blocks(to_blocks(query, query_layout, length))
    key = fold_blocks(to_blocks(key, layout, length))
    value = fold_blocks(to_blocks(value, layout, length))
    distance = neighbourhood_distances(layout)
    bias = None
    if distance_bias is not None:
        bias = gather_distance_bias(distance_bias, distance, length)
    attended, _ = kernel(query, key, value, mask, bias, training, distance=distance)
    return unfold_blocks(attended, batch, length)


def keys_per_query(layout):
    """How many scores each query computes under `layout`."""
    return layout.block_size * len(layout.offsets)


def to_blocks(x, layout, length):
    """`(batch, length, ...)` -> `(batch, blocks, len(offsets) * block_size, ...)`.

    Row `c` holds the positions of blocks `c + o` for each offset `o`, in
    order; positions outside `[0, length)` are zeros (or False). With the
    offsets `(0,)` this just cuts `x` into blocks.
    """
    block_size, offsets = layout
    blocks = -(-length // block_size)
    before = -min(offsets) * block_size
    after = blocks * block_size - length + max(offsets) * block_size
    padded = keras_internals.zero_pad(x, [(0, 0), (before, after)] + [(0, 0)] * (len(x.shape) - 2))
    shape = ops.shape(x)
    padded = ops.reshape(padded, (shape[0], -1, block_size) + tuple(shape[2:]))
    span = -min(offsets)
    neighbours = [padded[:, span + o : span + o + blocks] for o in offsets]
    if len(neighbours) == 1:
        return neighbours[0]
    return ops.concatenate(neighbours, axis=2)


def fold_blocks(x):
    """`(batch, blocks, block_length, ...)` -> `(batch * blocks, block_length, ...)`."""
    shape = ops.shape(x)
    return ops.reshape(x, (-1,) + tuple(shape[2:]))


def unfold_blocks(x, batch, length):
    """Inverse of `fold_blocks` for query blocks, trimmed back to `length`."""
    shape = ops.shape(x)
    return ops.reshape(x, (batch, -1) + tuple(shape[2:]))[:, :length]


def neighbourhood_distances(layout):
    """The static `(block_size, len(offsets) * block_size)` matrix of `i - j`
    between query `q` of block `c` and key `K` of blocks `c + o`."""
    block_size, offsets = layout
    distance = masking.relative_positions(block_size, block_size * len(offsets))
    return distance - min(offsets) * block_size


def band_mask(layout, window, causal, blockwise=False):
    """The static `(block_size, len(offsets) * block_size)` band of a
    neighbourhood: query `q` of block `c` against key `K` of blocks `c + o`."""
    distance = neighbourhood_distances(layout)
    if blockwise:
        # Blocks are the XPOS blocks and the neighbourhood is this block and
        # the previous one, so only causality is left to enforce.
        return ops.greater_equal(distance, 0)
    return masking.band_from_distance(distance, window, causal)


def blocked_mask(layout, window, causal, blockwise, query_valid, key_valid, length):
    """`(batch * blocks, 1, block_size, len(offsets) * block_size)` boolean mask:
    the band, keys inside the sequence that `key_valid` keeps, and queries
    `query_valid` keeps. `query_valid`, `key_valid`: boolean `(batch, length)`."""
    # Padded as integers: not every backend pads boolean tensors.
    keys = to_blocks(ops.cast(key_valid, "int32"), layout, length)
    queries = to_blocks(ops.cast(query_valid, "int32"), BandLayout(layout.block_size, (0,)), length)
    mask = ops.logical_and(
        ops.cast(keys, "bool")[:, :, None, :], ops.cast(queries, "bool")[:, :, :, None]
    )
    mask = ops.logical_and(mask, band_mask(layout, window, causal, blockwise)[None, None])
    return fold_blocks(mask)[:, None]
