"""Attention of a packed decoding step on the blocks its mask allows.

The serving engine packs the decoding rows' new tokens and a prompt chunk
in one row of a cached step (`CachedForward(query_owners=...)`): the
queries are the `rows` decoding tokens, then the chunk's tokens; the slots
are the `rows` windows of `window` slots laid end to end, then the
prompt's slots, then the new tokens' (the rows' first, in row order, then
the chunk's). Decoding token `i` sees only window `i` and its own new
slot; a chunk token only slots from the prompt's on. The dense masked
computation scores every query against every slot, `(rows + chunk) x
(rows x window + ...)` scores, which grows as `rows ** 2 x window`. Here
the kernel runs on the blocks a query can see: the decoding tokens as a
batch of `rows` queries over `window + 1` slots each, the chunk over the
slots from the prompt's on. A slot the mask hides outside those blocks has
weight zero in the dense computation, so the result is the same up to the
order of float sums.
"""

from typing import NamedTuple

from keras import ops


class PackedRows(NamedTuple):
    """The layout of a packed step's first `rows` queries: decoding row `i`
    reads slots `i * window .. (i + 1) * window - 1` and the `i`-th of the new
    tokens' slots, which are the last `queries` slots."""

    rows: int
    window: int


def attend(kernel, layout, query, key, value, mask, training=None, share=None):
    """`kernel(query, key, value, mask, None, training)` (the layer's
    `DotProductAttention`) on a packed step's blocks (see the module).

    `query` `(1, queries, heads, size)`, `key` and `value` `(1, slots,
    key_value_heads, size)` (the cache after the step's writes), `mask` the
    step's merged boolean mask `(1, 1, queries, slots)`; `share(keys,
    values)` gives each query head its key/value heads (grouped-query
    attention; None: they are the query's), applied to each block's keys
    and values rather than to the whole cache: fewer elements to compute
    from the cache's indices where the blocks are gathered in one kernel
    (torch's inductor). Returns the attended `(1, queries, heads,
    value_size)`.
    """
    if share is None:
        def share(keys, values):
            return keys, values
    rows, window = layout
    queries = query.shape[1]
    slots = key.shape[1]
    windows = rows * window
    new = slots - queries  # the first new token's slot

    def row_slots(tensor):  # (rows, window + 1, heads, size)
        own = ops.reshape(tensor[:, :windows], (rows, window) + tuple(tensor.shape[2:]))
        latest = ops.reshape(tensor[:, new:new + rows], (rows, 1) + tuple(tensor.shape[2:]))
        return ops.concatenate([own, latest], axis=1)

    # Each decoding row's own block of the mask: the diagonal of the
    # (rows x rows) grid of (1 x window) blocks, and of its new slots
    # (every `rows + 1`-th block once the grid is flat).
    own_mask = ops.reshape(mask[0, 0, :rows, :windows], (rows * rows, window))[:: rows + 1]
    latest_mask = ops.reshape(mask[0, 0, :rows, new:new + rows], (rows * rows, 1))[:: rows + 1]
    row_mask = ops.concatenate([own_mask, latest_mask], axis=1)
    row_query = ops.reshape(query[:, :rows], (rows, 1) + tuple(query.shape[2:]))
    decoded, _ = kernel(
        row_query, *share(row_slots(key), row_slots(value)), row_mask[:, None, None, :], None,
        training,
    )
    prompted, _ = kernel(
        query[:, rows:], *share(key[:, windows:], value[:, windows:]),
        mask[:, :, rows:, windows:], None, training,
    )
    decoded = ops.reshape(decoded, (1, rows) + tuple(decoded.shape[2:]))
    return ops.concatenate([decoded, prompted], axis=1)
