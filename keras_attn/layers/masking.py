"""Boolean attention masks, `True` where a query may attend to a key, rank 4
(broadcastable to `(batch, heads, query_length, key_length)`);
`merge_attention_masks` merges every source for the kernel."""

from keras import ops


def to_rank4_mask(mask):
    """A boolean `attention_mask` of rank 2 `(query, key)`, 3 `(batch, query,
    key)` or 4, broadcastable to `(batch, heads, query, key)`; ValueError for
    another rank."""
    mask = ops.cast(mask, "bool")
    rank = len(mask.shape)
    if rank == 2:
        return mask[None, None, :, :]
    if rank == 3:
        return mask[:, None, :, :]
    if rank == 4:
        return mask
    raise ValueError(
        "`attention_mask` must have rank 2, 3 or 4 (broadcastable to "
        f"(batch, query_length, key_length)); received shape {mask.shape}."
    )


def is_key_mask(attention_mask):
    """Whether `attention_mask` depends on the key alone (its query and heads
    axes are statically 1, as `(batch, 1, key_length)`)."""
    shape = tuple(attention_mask.shape)
    if len(shape) == 2:
        return shape[0] == 1
    if len(shape) == 3:
        return shape[1] == 1
    return len(shape) == 4 and shape[1] == 1 and shape[2] == 1


def causal_mask(query_length, key_length, query_positions=None, key_positions=None):
    """Boolean `(1, 1, query_length, key_length)` mask keeping keys `j <= i`
    (positions as in `relative_positions`)."""
    distance = relative_positions(query_length, key_length, query_positions, key_positions)
    return ops.greater_equal(distance, 0)[None, None, :, :]


def relative_positions(query_length, key_length, query_positions=None, key_positions=None):
    """`(query_length, key_length)` int matrix of `i - j`, query `i` and key `j`
    at `query_positions`/`key_positions` when given (a key/value cache), else
    at `0, 1, ...`."""
    rows = positions(query_length, query_positions)
    return rows[:, None] - positions(key_length, key_positions)[None, :]


def positions(length, given=None):
    """`given` as an int32 vector, or `0, 1, ..., length - 1`."""
    return ops.arange(length, dtype="int32") if given is None else ops.cast(given, "int32")


def local_mask(
    query_length, key_length, window, causal=False, blockwise=False,
    query_positions=None, key_positions=None, sink_tokens=0,
):
    """Boolean `(1, 1, query_length, key_length)` band of a local window.

    With query position `i` and key position `j` (see `relative_positions`):
    causal keeps `i - window < j <= i`; bidirectional keeps
    `|i - j| <= window // 2`; blockwise causal (XPOS) keeps `j <= i` in the
    query's block of `window` positions and the block before. `sink_tokens`
    `k > 0` also keeps keys `0 <= j < k` (under causality when `causal`):
    StreamingLLM's attention sinks (Xiao et al. 2023,
    https://arxiv.org/abs/2309.17453); not with `blockwise`.
    """
    distance = relative_positions(query_length, key_length, query_positions, key_positions)
    if blockwise:
        rows = positions(query_length, query_positions)[:, None]
        columns = positions(key_length, key_positions)[None, :]
        keep = ops.logical_and(
            ops.greater_equal(distance, 0),
            ops.greater_equal(columns // window, rows // window - 1),
        )
    else:
        keep = band_from_distance(distance, window, causal)
    if sink_tokens:
        columns = positions(key_length, key_positions)[None, :]
        sinks = ops.logical_and(ops.greater_equal(columns, 0), ops.less(columns, sink_tokens))
        if causal:
            sinks = ops.logical_and(sinks, ops.greater_equal(distance, 0))
        keep = ops.logical_or(keep, sinks)
    return keep[None, None, :, :]


def row_sink_mask(attention_mask, sink_tokens, key_row_positions, query_positions,
                  key_positions, causal):
    """Boolean `(batch, 1, query_length, key_length)`: the keys each row
    keeps as its sink tokens beside a window (see `local_mask`), where the
    rows of a batch stand at different positions: the keys at a row's own
    positions `0 <= j < sink_tokens` (`key_row_positions`, int `(batch,
    key_length)`), under `attention_mask` and, when `causal`, at or before
    the query (`query_positions`/`key_positions`, a clock shared by the
    rows, see `relative_positions`)."""
    key_row_positions = ops.convert_to_tensor(key_row_positions, "int32")
    sinks = ops.logical_and(
        ops.greater_equal(key_row_positions, 0), ops.less(key_row_positions, sink_tokens)
    )[:, None, None, :]
    if causal:
        distance = relative_positions(None, None, query_positions, key_positions)
        sinks = ops.logical_and(sinks, ops.greater_equal(distance, 0)[None, None])
    if attention_mask is not None:
        sinks = ops.logical_and(sinks, to_rank4_mask(attention_mask))
    return sinks


def band_from_distance(distance, window, causal):
    """The band as a function of `i - j`: `0 <= i - j < window` (causal) or
    `|i - j| <= window // 2`."""
    if causal:
        return ops.logical_and(ops.greater_equal(distance, 0), ops.less(distance, window))
    return ops.less_equal(ops.abs(distance), window // 2)


def merge_attention_masks(
    attention_mask=None,
    query_mask=None,
    key_mask=None,
    use_causal_mask=False,
    query_length=None,
    key_length=None,
    attention_window=None,
    blockwise=False,
    query_positions=None,
    key_positions=None,
    sink_tokens=0,
):
    """Combines every source of masking into one rank-4 boolean mask, or `None`
    when nothing is masked.

    Args:
        attention_mask: boolean, rank 2, 3 (see `to_rank4_mask`) or 4.
        query_mask: boolean `(batch, query_length)`; a masked query attends
            to nothing.
        key_mask: boolean `(batch, key_length)`; a masked key is never seen.
        use_causal_mask: keep only keys `j <= i`.
        query_length, key_length: for the causal and local masks.
        attention_window, blockwise, sink_tokens: a local band (`local_mask`),
            causal when `use_causal_mask` (which `blockwise` requires).
        query_positions, key_positions: see `relative_positions`.
    """
    mask = None

    def conjoin(current, new):
        return new if current is None else ops.logical_and(current, new)

    if attention_mask is not None:
        mask = conjoin(mask, to_rank4_mask(attention_mask))
    if query_mask is not None:
        mask = conjoin(mask, ops.cast(query_mask, "bool")[:, None, :, None])
    if key_mask is not None:
        mask = conjoin(mask, ops.cast(key_mask, "bool")[:, None, None, :])
    if use_causal_mask:
        mask = conjoin(
            mask, causal_mask(query_length, key_length, query_positions, key_positions)
        )
    if attention_window is not None:
        mask = conjoin(
            mask,
            local_mask(
                query_length,
                key_length,
                attention_window,
                causal=use_causal_mask,
                blockwise=blockwise,
                query_positions=query_positions,
                key_positions=key_positions,
                sink_tokens=sink_tokens,
            ),
        )
    return mask


def real_tokens(token_ids, pad_token_id, padding_mask=None):
    """Boolean `(batch, length)`, True for real tokens: `padding_mask` when given,
    else `token_ids != pad_token_id`, or all True when `pad_token_id` is None.
    The one place a model decides what padding is."""
    if padding_mask is not None:
        return ops.cast(padding_mask, "bool")
    if pad_token_id is None:
        return ops.ones_like(token_ids, "bool")
    return ops.not_equal(token_ids, pad_token_id)


def unilm_orders(segment_ids, before=None):
    """UniLM's token orders, int `(batch, length)`: the cumulative sum of the
    segment ids plus `before` `(batch,)`, the sum a decoding cache already
    holds (None: 0)."""
    orders = ops.cumsum(ops.cast(segment_ids, "int32"), axis=1)
    return orders if before is None else ops.expand_dims(before, 1) + orders


def real_token_positions(real, before=None):
    """RoBERTa's positions, int `(batch, length)`: real tokens (`real`) count 0, 1,
    ... after the `before` `(batch,)` real tokens a cache holds (None: 0);
    padding is -1."""
    numbered = ops.cumsum(ops.cast(real, "int32"), axis=1) - 1
    if before is not None:
        numbered = ops.expand_dims(before, 1) + numbered
    return ops.where(ops.cast(real, "bool"), numbered, -1)


def sequence_mask(
    key_valid, query_orders=None, key_orders=None, query_positions=None, key_positions=None
):
    """The self-attention mask a model derives from its inputs, full pass and
    decoding step alike: boolean `(batch, 1, key_length)` when only `key_valid`
    (`(batch, key_length)`, real keys) is given, else `(batch, query_length,
    key_length)`.

    `query_orders`, `key_orders` (`unilm_orders`): UniLM's rule (Dong et al.
    2019, https://arxiv.org/abs/1905.03197), query `i` sees key `j` iff
    `order_j <= order_i`. `query_positions`, `key_positions`: a query never
    sees the key at its own position (T-TA).
    """
    mask = ops.cast(key_valid, "bool")[:, None, :]
    if query_orders is not None:
        mask = ops.logical_and(
            mask, ops.less_equal(key_orders[:, None, :], query_orders[:, :, None])
        )
    if query_positions is not None:
        distance = relative_positions(
            ops.shape(query_positions)[0], ops.shape(key_positions)[0],
            query_positions, key_positions,
        )
        mask = ops.logical_and(mask, ops.not_equal(distance, 0)[None])
    return mask
