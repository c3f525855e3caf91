"""Mask merging and masked softmax: the one place where logits become probabilities.

Every attention layer in keras_attn turns scores into probabilities through
`masked_softmax`, and every boolean mask (explicit, implicit Keras masks from
`Embedding(mask_zero=True)`, causal) is merged by `merge_attention_masks`.

Conventions used throughout:

- A boolean mask is `True` where a query may attend to a key.
- Masks are rank 4, broadcastable to `(batch, heads, query_length, key_length)`.
- A query row whose keys are all masked attends to nothing: its probabilities
  are all zero, so its attention result is exactly zero, never NaN and never
  a uniform average.
"""

import numpy as np
from keras import ops


def large_negative(dtype):
    """A finite large negative number representable in `dtype`.

    Used to fold a boolean mask into an additive bias. `-0.7 * max` rather
    than the dtype's lowest value so that adding a bounded logit to it cannot
    overflow to `-inf` (which would turn a fully masked row into NaN).
    """
    dtype = str(dtype).split(".")[-1]
    if dtype == "bfloat16":
        import ml_dtypes

        return float(-0.7 * float(ml_dtypes.finfo(ml_dtypes.bfloat16).max))
    return float(-0.7 * np.finfo(np.dtype(dtype)).max)


def to_rank4_mask(mask):
    """Reshapes a boolean `attention_mask` to broadcast against
    `(batch, heads, query_length, key_length)`.

    Rank 2 `(query_length, key_length)` and rank 3
    `(batch, query_length, key_length)` masks get a heads axis; rank 4 masks
    are returned as they are.
    """
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
    """Whether a boolean `attention_mask` depends on the key alone: its query
    and heads axes are statically 1, as a padding mask `(batch, 1, key_length)`."""
    shape = tuple(attention_mask.shape)
    if len(shape) == 2:
        return shape[0] == 1
    if len(shape) == 3:
        return shape[1] == 1
    return len(shape) == 4 and shape[1] == 1 and shape[2] == 1


def causal_mask(query_length, key_length):
    """Boolean `(1, 1, query_length, key_length)` mask keeping keys `j <= i`."""
    return ops.greater_equal(relative_positions(query_length, key_length), 0)[None, None, :, :]


def relative_positions(query_length, key_length):
    """`(query_length, key_length)` int matrix of `i - j` (top-left aligned)."""
    return ops.arange(query_length)[:, None] - ops.arange(key_length)[None, :]


def local_mask(query_length, key_length, window, causal=False, blockwise=False):
    """Boolean `(1, 1, query_length, key_length)` band of a local window.

    With query index `i` and key index `j` (top-left aligned):

    - causal: keep `i - window < j <= i` (the `window` most recent keys, the
      query's own included);
    - bidirectional: keep `|i - j| <= window // 2` (`window + 1` keys for an
      even window, `window` for an odd one, fewer at the edges);
    - blockwise causal (XPOS): split positions into blocks of `window`; keep
      `j <= i` in the query's own block and the block before it.

    Built from two index vectors, no Python loop, so its cost is the size of
    the mask itself.
    """
    distance = relative_positions(query_length, key_length)
    if blockwise:
        rows = ops.arange(query_length)[:, None]
        columns = ops.arange(key_length)[None, :]
        keep = ops.logical_and(
            ops.greater_equal(distance, 0),
            ops.greater_equal(columns // window, rows // window - 1),
        )
    else:
        keep = band_from_distance(distance, window, causal)
    return keep[None, None, :, :]


def band_from_distance(distance, window, causal):
    """The sliding-window band as a function of `i - j`: `0 <= i - j < window`
    (causal) or `|i - j| <= window // 2`."""
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
):
    """Combines every source of masking into one rank-4 boolean mask.

    Args:
        attention_mask: boolean, broadcastable to
            `(batch, query_length, key_length)` (rank 2 or 3) or to
            `(batch, heads, query_length, key_length)` (rank 4).
        query_mask: boolean `(batch, query_length)`; a masked query position
            attends to nothing.
        key_mask: boolean `(batch, key_length)`; a masked key is never
            attended to.
        use_causal_mask: keep only keys `j <= i` (top-left aligned).
        query_length, key_length: static or dynamic lengths, needed only for
            the causal and local masks.
        attention_window: keep only a local band (see `local_mask`), causal
            when `use_causal_mask`.
        blockwise: make a causal band blockwise (see `local_mask`).

    Returns:
        A boolean tensor broadcastable to
        `(batch, heads, query_length, key_length)`, or `None` when nothing
        is masked.
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
        mask = conjoin(mask, causal_mask(query_length, key_length))
    if attention_window is not None:
        mask = conjoin(
            mask,
            local_mask(
                query_length,
                key_length,
                attention_window,
                causal=use_causal_mask,
                blockwise=blockwise and use_causal_mask,
            ),
        )
    return mask


def masked_softmax(logits, mask=None, axis=-1):
    """Softmax in float32 that gives exactly zero probability where masked.

    `probabilities = softmax(where(mask, logits, large_negative)) * mask`.
    The multiplication by the mask is exact for partially masked rows (the
    masked terms underflow to 0 already) and turns fully masked rows, which
    would otherwise be uniform, into rows of zeros.

    Args:
        logits: scores of any float dtype; cast to float32 before the
            softmax so that float16 and bfloat16 cannot overflow.
        mask: optional boolean tensor broadcastable to `logits`.
        axis: the key axis.

    Returns:
        float32 probabilities with the shape of `logits`.
    """
    logits = ops.cast(logits, "float32")
    if mask is None:
        return ops.softmax(logits, axis=axis)
    logits = ops.where(mask, logits, large_negative("float32"))
    probabilities = ops.softmax(logits, axis=axis)
    return probabilities * ops.cast(mask, "float32")


def fold_mask_into_bias(mask, bias, dtype):
    """Returns one additive bias equal to `bias` where `mask`, very negative
    elsewhere, so that a fused kernel taking a single bias sees both."""
    negative = ops.cast(large_negative(dtype), dtype)
    if bias is None:
        return ops.where(mask, ops.cast(0.0, dtype), negative)
    return ops.where(mask, ops.cast(bias, dtype), negative)


def rows_with_any_key(mask):
    """`(batch, query_length, heads, 1)` booleans: does query row i keep any key?

    Laid out to broadcast against attention results in the
    `(batch, query_length, heads, head_size)` layout.
    """
    return ops.transpose(ops.any(mask, axis=-1), (0, 2, 1))[..., None]
