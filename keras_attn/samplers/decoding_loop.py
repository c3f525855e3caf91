"""The bookkeeping every decoding loop shares: which step runs, which tokens
are forced (a prompt being read, a start token), which rows have finished."""

from typing import NamedTuple
from typing import Optional

import keras
import numpy as np
from keras import ops

from keras_attn.concrete import torch_compiling


class DecodingSettings(NamedTuple):
    """What a decoding loop is asked to do (see `Generator.generate`).

    Attributes:
        max_new_tokens: the most tokens generated per row.
        pad_token_id: what a finished row holds.
        end_token_id: a row stops after generating it (None: never).
        min_new_tokens: `end_token_id` is forbidden before this many tokens.
        start_token_id: forced as every row's first generated token.
    """

    max_new_tokens: int
    pad_token_id: int
    end_token_id: Optional[int] = None
    min_new_tokens: int = 0
    start_token_id: Optional[int] = None


def run_steps(body, lengths, limits, state, done_check="each"):
    """Runs `body(index, tokens, cache, done, ...)` from the last token of the
    shortest prompt until every row is done or full; returns the final state
    without the index. `state` starts with `(tokens, cache, done)`.

    On JAX and TensorFlow this is the backend's `while_loop`. On torch it is
    a Python loop, and `done_check` says when `done` is read back: `"each"`
    before each step; `"late"` one step later, so the host queues a step
    while the previous runs (the loop may run one step past the end, for
    callers whose steps then change nothing); None never (no row ends
    early)."""
    if done_check not in ("each", "late", None):
        raise ValueError(f'`done_check` must be "each", "late" or None; received {done_check!r}.')
    index = ops.min(lengths) - 1
    if keras.config.backend() == "torch" and not torch_compiling():
        state, earlier = tuple(state), None
        for _ in range(int(ops.max(limits)) - 1 - int(index)):
            done = state[2] if done_check == "each" else earlier
            if done is not None and bool(ops.all(done)):
                break
            if done_check == "late":
                earlier = state[2]
            index, *state = body(index, *state)
        return tuple(state)

    def condition(index, tokens, cache, done, *rest):
        return ops.logical_and(index < ops.max(limits) - 1, ops.logical_not(ops.all(done)))

    return ops.while_loop(condition, body, (index,) + tuple(state))[1:]


def picked(pick, logits, index, tokens):
    """What a decoding step returns in place of its `logits`: themselves
    for `pick=None`, else `function(logits, index, tokens, *args)` for
    `pick=(function, args)` (a sampler's `next_tokens`), so that a step
    compiled whole (torch's `CompiledStep`) also picks the token."""
    if pick is None:
        return logits
    function, args = pick
    return function(logits, index, tokens, *args)


def forbid_early_end(logits, generated, settings):
    """`logits` `(rows, vocab)` with `end_token_id` at -inf in rows that
    have generated fewer than `min_new_tokens` tokens (`generated`)."""
    if settings.end_token_id is None or settings.min_new_tokens == 0:
        return logits
    early = ops.less(generated, settings.min_new_tokens)[:, None]
    is_end = ops.equal(ops.arange(logits.shape[-1]), settings.end_token_id)[None]
    return ops.where(ops.logical_and(early, is_end), -np.inf, logits)


def forced_tokens(tokens, following, lengths, settings):
    """`(forced, token)`, both `(rows,)`: the rows whose token at position
    `following` is not chosen by the model (their prompt's, or the start
    token as their first generated one) and that token."""
    token = ops.take(tokens, ops.reshape(following, (1,)), axis=1)[:, 0]
    forced = ops.less(following, lengths)
    if settings.start_token_id is not None:
        starts = ops.equal(following, lengths)
        token = ops.where(starts, settings.start_token_id, token)
        forced = ops.logical_or(forced, starts)
    return forced, token


def write_column(tokens, following, chosen):
    """`tokens` `(rows, total)` with column `following` (an int32 scalar
    tensor) set to `chosen` `(rows,)`, by a select that torch's compiler
    traces."""
    column = ops.equal(ops.arange(tokens.shape[1], dtype="int32"), following)
    return ops.where(column[None, :], chosen[:, None], tokens)


def finishes(chosen, forced, following, lengths, limits, settings):
    """Rows past their prompt whose token at `following` ends them: their
    last allowed token, or a generated (not forced) `end_token_id`."""
    finished = ops.greater_equal(following + 1, limits)
    if settings.end_token_id is not None:
        ends = ops.logical_and(
            ops.equal(chosen, settings.end_token_id), ops.logical_not(forced)
        )
        finished = ops.logical_or(finished, ends)
    return ops.logical_and(ops.greater_equal(following, lengths), finished)
