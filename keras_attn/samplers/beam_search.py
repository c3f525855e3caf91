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

    Not a `Sampler`: beam search keeps several sequences per prompt and
    reorders them (and their caches) every step; it runs its own decoding
    loop, `run_loop` (see `keras_attn.generation.Generator.beam_search` for
    the exact algorithm). Passed as `generate(..., sampler=BeamSearch(...))`,
    it returns the best sequence of each prompt.

    Args:
        num_beams: an integer >= 1; `num_beams=1` is greedy decoding.
        length_penalty: a finite number; the beams are ranked at the end by
            `score / length ** length_penalty` (0: by the summed
            log-probability; > 0 favours longer sequences).

    Example:

    >>> model.generate(prompts, max_new_tokens=32, end_token_id=3,
    ...                sampler=keras_attn.samplers.BeamSearch(num_beams=4))
    """

    def __init__(self, num_beams, length_penalty=0.0):
        self.num_beams = check_number("num_beams", num_beams, type(self).__name__, minimum=1, integer=True)
        valid = isinstance(length_penalty, (int, float)) and not isinstance(length_penalty, bool)
        if not valid or not math.isfinite(length_penalty):
            raise ValueError(
                f"BeamSearch: `length_penalty` must be a finite number; received "
                f"length_penalty={length_penalty!r}."
            )
        self.length_penalty = float(length_penalty)

    def run_loop(self, step, tokens, lengths, cache, settings, seed=None):
        """Beam search over every prompt at once: the batch is flattened to
        `batch * num_beams` rows (row `b * num_beams + k` is beam `k` of
        prompt `b`), the prompts' cache copied to their beams, and each step
        reorders the rows and their caches (`cache.select_rows`).

        Args:
            step: as for `Sampler.run_loop`, with a `select_rows(rows)`
                method giving the step of those rows (a condition per row).
            tokens, lengths, cache, settings: as for `Sampler.run_loop`, one
                row per prompt.
            seed: unused (beam search draws nothing).

        Returns:
            `(tokens, scores, beam_lengths)`: int32 `(batch * num_beams,
            total)`, the summed float32 log-probabilities `(batch,
            num_beams)` and the generated lengths `(batch, num_beams)`.
        """
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
            tokens = ops.slice_update(tokens, (0, following), chosen[:, None])
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
        return {"num_beams": self.num_beams, "length_penalty": self.length_penalty}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"BeamSearch(num_beams={self.num_beams}, length_penalty={self.length_penalty})"


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
