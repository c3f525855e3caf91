"""Beam search settings for `Generator.generate` and `Generator.beam_search`."""

import math

import keras
import numpy as np
from keras import ops

from keras_attn.samplers import decoding_loop
from keras_attn.samplers.sampler import check_number


@keras.saving.register_keras_serializable(package="keras_attn")
class BeamSearch:
    """Beam search with `num_beams` beams per prompt and a length penalty.

    Not a `Sampler`: it keeps and reorders several sequences (and caches)
    per prompt in its own loop, `run_loop`; the algorithm is described in
    docs/generation.md. Passed as `generate(..., sampler=BeamSearch(...))`,
    it returns each prompt's best sequence.

    Args:
        num_beams: an integer >= 1; `num_beams=1` is greedy decoding.
        length_penalty: a finite number; beams are ranked by `score / length
            ** length_penalty` (0: by summed log-probability). transformers'
            default is 1.0.
        early_stopping: False (the default), True or `"never"`, giving
            transformers' tokens for its `generate(early_stopping=...)`; or
            `"all_finished"`, where finished beams stay among the beams until
            all have finished.

    Example:

    >>> model.generate(prompts, max_new_tokens=32, end_token_id=3,
    ...                sampler=keras_attn.samplers.BeamSearch(num_beams=4))
    """

    def __init__(self, num_beams, length_penalty=0.0, early_stopping=False):
        self.num_beams = check_number("num_beams", num_beams, type(self).__name__, minimum=1, integer=True)
        valid = isinstance(length_penalty, (int, float)) and not isinstance(length_penalty, bool)
        if not valid or not math.isfinite(length_penalty):
            raise ValueError(
                f"BeamSearch: `length_penalty` must be a finite number; received "
                f"length_penalty={length_penalty!r}."
            )
        self.length_penalty = float(length_penalty)
        if not (isinstance(early_stopping, bool) or early_stopping in ("never", "all_finished")):
            raise ValueError(
                f"BeamSearch: `early_stopping` must be one of {list(EARLY_STOPPING)}; "
                f"received early_stopping={early_stopping!r}."
            )
        self.early_stopping = early_stopping

    @property
    def keeps_finished_beams(self):
        """Whether finished beams stay among the beams (`"all_finished"`)
        rather than moving to a list of finished hypotheses."""
        return self.early_stopping == "all_finished"

    def run_loop(self, step, tokens, lengths, cache, settings, seed=None):
        """The search's decoding loop; see `Generator.beam_search` for both
        algorithms. Returns `(tokens, scores, beam_lengths)`: int32
        `(batch * num_beams, total)`, float32 `(batch, num_beams)` scores
        (summed log-probabilities for `"all_finished"`; for transformers'
        modes already divided by `length ** length_penalty`, best first)
        and int32 `(batch, num_beams)` generated lengths."""
        if self.keeps_finished_beams:
            return self._run_beams_to_the_end(step, tokens, lengths, cache, settings)
        return self._run_with_finished_hypotheses(step, tokens, lengths, cache, settings)

    def _run_with_finished_hypotheses(self, step, tokens, lengths, cache, settings):
        """transformers' beam search (`GenerationMixin._beam_search`) with its
        `early_stopping` modes (docs/generation.md)."""
        num_beams, penalty = self.num_beams, self.length_penalty
        batch = tokens.shape[0]
        rows = batch * num_beams
        wide = 2 * num_beams
        beam_rows = ops.repeat(ops.arange(batch, dtype="int32"), num_beams)
        step = step.select_rows(beam_rows)
        cache = cache.select_rows(beam_rows)
        tokens = ops.take(tokens, beam_rows, axis=0)
        lengths = ops.take(lengths, beam_rows, axis=0)
        row_lengths = ops.reshape(lengths, (batch, num_beams))[:, 0]
        limits = lengths + settings.max_new_tokens
        first_live = ops.equal(ops.arange(num_beams), 0)[None]
        # transformers' -1e9 for beams that do not exist yet, not -inf: its
        # sums and comparisons are what the search reproduces.
        scores = ops.where(first_live, 0.0, -1e9) * ops.ones((batch, 1), "float32")
        finished_tokens = tokens
        finished_scores = ops.full((batch, num_beams), -1e9, "float32")
        finished_lengths = ops.zeros((batch, num_beams), "int32")
        is_finished = ops.zeros((batch, num_beams), "bool")
        improvable = ops.ones((batch,), "bool")
        done = ops.zeros((rows,), "bool")
        row_offsets = ops.arange(batch, dtype="int32")[:, None]
        in_top = ops.less(ops.arange(wide), num_beams)[None]
        never = self.early_stopping == "never" and penalty > 0

        def body(index, tokens, cache, done, scores, finished_tokens, finished_scores,
                 finished_lengths, is_finished, improvable):
            logits, cache = step(tokens, index, cache)
            vocab = logits.shape[-1]
            following = index + 1
            generated = following - row_lengths + 1  # tokens generated with this one
            log_probs = ops.log_softmax(logits, axis=-1)
            log_probs = decoding_loop.forbid_early_end(log_probs, following - lengths, settings)
            candidates = scores[:, :, None] + ops.reshape(log_probs, (batch, num_beams, vocab))
            candidates = ops.reshape(candidates, (batch, num_beams * vocab))
            best = best_indices(candidates, wide)
            best_scores = ops.take_along_axis(candidates, best, axis=1)
            source, token = best // vocab, best % vocab
            ends = ops.greater_equal(generated, settings.max_new_tokens)[:, None]
            if settings.end_token_id is not None:
                ends = ops.logical_or(ends, ops.equal(token, settings.end_token_id))
            ends = ops.broadcast_to(ends, (batch, wide))
            # The candidates' sequences: their beam's, then their token.
            candidate_rows = ops.reshape(row_offsets * num_beams + source, (batch * wide,))
            candidate_tokens = ops.take(tokens, candidate_rows, axis=0)
            candidate_tokens = decoding_loop.write_column(
                candidate_tokens, following, ops.reshape(token, (batch * wide,))
            )
            # Live beams: the best candidates that do not end.
            live_scores = best_scores - 1e9 * ops.cast(ends, "float32")
            keep = best_indices(live_scores, num_beams)
            new_scores = ops.take_along_axis(live_scores, keep, axis=1)
            new_source = ops.take_along_axis(source, keep, axis=1)
            new_token = ops.take_along_axis(token, keep, axis=1)
            # Finished hypotheses: the row's best of the old ones and the
            # ending candidates among the first `num_beams`.
            length = ops.cast(generated, "float32")[:, None]
            normalised = best_scores / length ** penalty
            blocked = ops.logical_not(improvable)
            if self.early_stopping is True:
                blocked = ops.logical_or(blocked, ops.all(is_finished, axis=1))
            blocked = blocked[:, None]
            joins = ops.logical_and(ends, in_top)
            normalised = (
                normalised - 1e9 * ops.cast(blocked, "float32")
                - 1e9 * ops.cast(ops.logical_not(joins), "float32")
            )
            merged_scores = ops.concatenate([finished_scores, normalised], axis=1)
            chosen = best_indices(merged_scores, num_beams)
            merged_rows = ops.concatenate(
                [
                    ops.reshape(ops.arange(rows, dtype="int32"), (batch, num_beams)),
                    rows + ops.reshape(ops.arange(batch * wide, dtype="int32"), (batch, wide)),
                ],
                axis=1,
            )
            merged_lengths = ops.concatenate(
                [finished_lengths, ops.broadcast_to(ops.cast(generated, "int32")[:, None], (batch, wide))],
                axis=1,
            )
            merged_finished = ops.concatenate([is_finished, joins], axis=1)
            picked_rows = ops.reshape(ops.take_along_axis(merged_rows, chosen, axis=1), (rows,))
            new_finished_tokens = ops.take(
                ops.concatenate([finished_tokens, candidate_tokens], axis=0), picked_rows, axis=0
            )
            new_finished_scores = ops.take_along_axis(merged_scores, chosen, axis=1)
            new_finished_lengths = ops.take_along_axis(merged_lengths, chosen, axis=1)
            new_is_finished = ops.take_along_axis(merged_finished, chosen, axis=1)
            # Whether a live beam could still beat the worst finished one.
            hypothetical = ops.cast(generated, "float32")
            if never:
                hypothetical = ops.full((batch,), settings.max_new_tokens, "float32")
            best_possible = new_scores[:, :1] / hypothetical[:, None] ** penalty
            worst = ops.where(
                new_is_finished, ops.min(new_finished_scores, axis=1, keepdims=True), -1e9
            )
            new_improvable = ops.logical_and(
                improvable, ops.any(ops.greater(best_possible, worst), axis=1)
            )
            # Rows reading their prompt or taking the start token, and rows
            # past their last token, keep everything; the forced token is
            # written to every beam.
            forced, forced_token = decoding_loop.forced_tokens(tokens, following, lengths, settings)
            active = ops.logical_and(
                ops.logical_not(ops.reshape(forced, (batch, num_beams))[:, 0]),
                ops.less_equal(generated, settings.max_new_tokens),
            )
            act = active[:, None]
            selected = ops.where(
                act, row_offsets * num_beams + new_source,
                row_offsets * num_beams + ops.arange(num_beams, dtype="int32")[None],
            )
            selected = ops.reshape(selected, (rows,))
            tokens = ops.take(tokens, selected, axis=0)
            written = ops.where(forced, forced_token, ops.reshape(new_token, (rows,)))
            tokens = decoding_loop.write_column(tokens, following, written)
            cache = cache.select_rows(selected)
            scores = ops.where(act, new_scores, scores)
            row_active = ops.repeat(active, num_beams)[:, None]
            finished_tokens = ops.where(row_active, new_finished_tokens, finished_tokens)
            finished_scores = ops.where(act, new_finished_scores, finished_scores)
            finished_lengths = ops.where(act, new_finished_lengths, finished_lengths)
            is_finished = ops.where(act, new_is_finished, is_finished)
            improvable = ops.where(active, new_improvable, improvable)
            stops = ops.logical_or(
                ops.logical_not(improvable), ops.greater_equal(generated, settings.max_new_tokens)
            )
            if self.early_stopping is True:
                stops = ops.logical_or(stops, ops.all(is_finished, axis=1))
            stops = ops.logical_and(stops, ops.greater_equal(generated, 1))
            done = ops.logical_or(done, ops.repeat(ops.logical_and(active, stops), num_beams))
            return (index + 1, tokens, cache, done, scores, finished_tokens, finished_scores,
                    finished_lengths, is_finished, improvable)

        state = decoding_loop.run_steps(
            body, lengths, limits,
            (tokens, cache, done, scores, finished_tokens, finished_scores, finished_lengths,
             is_finished, improvable),
        )
        finished_tokens, finished_scores, finished_lengths = state[4], state[5], state[6]
        return finished_tokens, finished_scores, finished_lengths

    def _run_beams_to_the_end(self, step, tokens, lengths, cache, settings):
        """The `"all_finished"` search over every prompt at once, on `batch *
        num_beams` rows (row `b * num_beams + k` is beam `k` of prompt `b`),
        reordering rows and caches each step (`cache.select_rows`). Arguments as
        `Sampler.run_loop`'s (`step` with `select_rows`; `seed` unused); returns
        `(tokens, scores, beam_lengths)` as `run_loop`."""
        num_beams, pad = self.num_beams, settings.pad_token_id
        batch = tokens.shape[0]
        rows = batch * num_beams
        beam_rows = ops.repeat(ops.arange(batch, dtype="int32"), num_beams)
        step = step.select_rows(beam_rows)
        cache = cache.select_rows(beam_rows)
        tokens = ops.take(tokens, beam_rows, axis=0)
        lengths = ops.take(lengths, beam_rows, axis=0)
        limits = lengths + settings.max_new_tokens
        first_live = ops.equal(ops.arange(num_beams), 0)[None]
        scores = ops.where(first_live, 0.0, -np.inf) * ops.ones((batch, 1), "float32")
        done = ops.zeros((rows,), "bool")
        beam_lengths = ops.zeros((rows,), "int32")
        row_offsets = ops.arange(batch, dtype="int32")[:, None] * num_beams

        def body(index, tokens, cache, done, scores, beam_lengths):
            logits, cache = step(tokens, index, cache)
            vocab = logits.shape[-1]
            following = index + 1
            log_probs = ops.log_softmax(logits, axis=-1)
            log_probs = decoding_loop.forbid_early_end(log_probs, following - lengths, settings)
            candidates = scores[:, :, None] + ops.reshape(log_probs, (batch, num_beams, vocab))
            only_pad = ops.where(ops.equal(ops.arange(vocab), pad), scores[:, :, None], -np.inf)
            done_beams = ops.reshape(done, (batch, num_beams))[:, :, None]
            candidates = ops.reshape(
                ops.where(done_beams, only_pad, candidates), (batch, num_beams * vocab)
            )
            best = best_indices(candidates, num_beams)
            source = best // vocab
            chosen = ops.reshape(best % vocab, (rows,))
            new_scores = ops.take_along_axis(candidates, best, axis=1)
            # Rows reading their prompt, or taking the start token, keep their beams.
            forced, forced_token = decoding_loop.forced_tokens(tokens, following, lengths, settings)
            forced_rows = ops.reshape(forced, (batch, num_beams))
            source = ops.where(forced_rows, ops.arange(num_beams, dtype="int32")[None], source)
            scores = ops.where(forced_rows, scores, new_scores)
            chosen = ops.where(forced, forced_token, chosen)
            selected = ops.reshape(row_offsets + source, (rows,))
            tokens = ops.take(tokens, selected, axis=0)
            tokens = decoding_loop.write_column(tokens, following, chosen)
            cache = cache.select_rows(selected)
            was_done = ops.take(done, selected, axis=0)
            grows = ops.logical_and(ops.logical_not(was_done), ops.greater_equal(following, lengths))
            beam_lengths = ops.take(beam_lengths, selected, axis=0) + ops.cast(grows, "int32")
            finished = decoding_loop.finishes(chosen, forced, following, lengths, limits, settings)
            done = ops.logical_or(was_done, finished)
            return index + 1, tokens, cache, done, scores, beam_lengths

        tokens, _, _, scores, beam_lengths = decoding_loop.run_steps(
            body, lengths, limits, (tokens, cache, done, scores, beam_lengths)
        )
        return tokens, scores, ops.reshape(beam_lengths, (batch, num_beams))

    def get_config(self):
        return {
            "num_beams": self.num_beams,
            "length_penalty": self.length_penalty,
            "early_stopping": self.early_stopping,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return (
            f"BeamSearch(num_beams={self.num_beams}, length_penalty={self.length_penalty}, "
            f"early_stopping={self.early_stopping!r})"
        )


# transformers' `early_stopping` values, and this library's earlier search.
EARLY_STOPPING = (False, True, "never", "all_finished")


def best_indices(scores, count):
    """int32 `(rows, count)`: the indices of each row's `count` largest
    scores, largest first, ties to the lowest index (`ops.top_k` leaves
    ties unspecified on torch)."""
    width = scores.shape[-1]
    ids = ops.arange(width, dtype="int32")[None]
    taken = ops.zeros_like(scores, "bool")
    picks = []
    for _ in range(count):
        remaining = ops.where(taken, -np.inf, scores)
        is_best = ops.equal(remaining, ops.max(remaining, axis=-1, keepdims=True))
        is_best = ops.logical_and(is_best, ops.logical_not(taken))
        pick = ops.min(ops.where(is_best, ids, width), axis=-1)
        picks.append(pick)
        taken = ops.logical_or(taken, ops.equal(ids, pick[:, None]))
    return ops.cast(ops.stack(picks, axis=1), "int32")
