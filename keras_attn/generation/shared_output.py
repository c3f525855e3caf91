"""Decoding one output from several prompts at once (bert4keras's
`use_states=True`), each step's probabilities combined by `combine`."""

from typing import NamedTuple

import keras
import numpy as np
from keras import ops

from keras_attn.generation.generator import _sampler_key
from keras_attn.generation.prompts import prepare_prompts
from keras_attn.samplers import decoding_loop


class SharedOutputCache(NamedTuple):
    """The loop state of a shared-output decode.

    Attributes:
        prompts: one `DecodingCache` per prompt, each with a row per beam
            (or sample), since a prompt's tokens sit at its own positions.
        states: the `combine` hook's states (a nest of tensors), carried
            from step to step and not reordered with the beams.
    """

    prompts: tuple
    states: object

    def select_rows(self, rows):
        return SharedOutputCache(
            tuple(cache.select_rows(rows) for cache in self.prompts), self.states
        )


class SharedOutputStep:
    """The step over the shared output: at loop index `t` prompt `p` reads its
    token at position `lengths[p] - 1 + t`; the prompts' softmaxes
    `(prompts, rows, vocab)` go through `combine`, and the log of its
    `(rows, vocab)` result is the logits."""

    def __init__(self, forward, lengths, last_tokens, combine, has_states):
        self.forward = forward
        self.lengths = lengths
        self.last_tokens = last_tokens
        self.combine = combine
        self.has_states = has_states

    def __call__(self, tokens, index, cache, pick=None):
        rows = tokens.shape[0]
        reading_output = ops.greater(index, 0)
        output_token = ops.slice(tokens, (0, index), (rows, 1))
        writes = ops.logical_and(reading_output, ops.ones((rows,), "bool"))
        segment_ids = None
        if self.forward.unilm:
            segment_ids = ops.cast(writes, "int32")[:, None]
        probabilities, caches = [], []
        for prompt, prompt_cache in enumerate(cache.prompts):
            current = ops.where(reading_output, output_token, self.last_tokens[prompt])
            logits, prompt_cache = self.forward(
                current, self.lengths[prompt] - 1 + index, prompt_cache,
                segment_ids=segment_ids, write_rows=writes,
            )
            probabilities.append(ops.softmax(ops.cast(logits[:, 0], "float32"), axis=-1))
            caches.append(prompt_cache)
        states = cache.states if self.has_states else None
        combined, states = self.combine(ops.stack(probabilities, axis=0), states)
        combined = ops.cast(ops.convert_to_tensor(combined), "float32")
        if tuple(combined.shape) != (rows, probabilities[0].shape[-1]):
            raise ValueError(
                f"`combine` must return probabilities of shape (rows, vocab) = "
                f"({rows}, {probabilities[0].shape[-1]}), one row per beam or sample; "
                f"received shape {tuple(combined.shape)}."
            )
        if not self.has_states:
            states = cache.states
        logits = decoding_loop.picked(pick, ops.log(combined), index, tokens)
        return logits, SharedOutputCache(tuple(caches), states)

    def select_rows(self, rows):
        return self


def shared_output_decode(generator, decoder_loop, prompts, rows, settings, combine, states,
                         seed):
    """Runs `decoder_loop` (a `Sampler` or `BeamSearch`) over one output
    shared by `prompts` (lists of ids) with `rows` rows (1 for beam search,
    which makes its beams, or the number of samples); returns what its
    `run_loop` returns, the output after the placeholder token."""
    forward = generator.forward
    prepared = prepare_prompts(
        forward, prompts, settings.max_new_tokens, settings.end_token_id,
        settings.min_new_tokens, settings.start_token_id,
    )
    has_states = states is not None
    # Without states the loop carries a placeholder (None is no loop value on TensorFlow).
    carried = keras.tree.map_structure(np.asarray, states) if has_states else np.zeros((), "int32")
    key = (
        "shared_output", _sampler_key(decoder_loop), settings, prepared.buffer.shape,
        # `combine` itself, not its id: the key keeps it alive, so a later
        # function can never reuse its id and find its program.
        prepared.bucket, rows, combine, has_states,
        keras.tree.map_structure(lambda x: (x.shape, x.dtype.name), carried),
    )

    def make_loop():
        bucket, total = prepared.bucket, prepared.buffer.shape[1]
        count = len(prompts)

        def loop(buffer, lengths, seed, states):
            buffer = ops.convert_to_tensor(buffer, "int32")
            lengths = ops.convert_to_tensor(lengths, "int32")
            seed = ops.convert_to_tensor(seed, "int32")
            states = keras.tree.map_structure(ops.convert_to_tensor, states)
            cache = forward.empty_cache(count, forward.capacity(bucket, total))
            prompt_mask = ops.arange(bucket)[None, :] < lengths[:, None]
            _, cache = forward(buffer[:, :bucket], 0, cache, padding_mask=prompt_mask, logits=False)
            caches = tuple(
                cache.select_rows(ops.full((rows,), prompt, "int32")) for prompt in range(count)
            )
            last_tokens = ops.take_along_axis(buffer, (lengths - 1)[:, None], axis=1)[:, 0]
            step = SharedOutputStep(forward, lengths, last_tokens, combine, has_states)
            output = ops.full((rows, 1 + settings.max_new_tokens), settings.pad_token_id, "int32")
            return decoder_loop.run_loop(
                step, output, ops.ones((rows,), "int32"),
                SharedOutputCache(caches, states), settings, seed,
            )

        return loop

    run = generator._compiled_loop(key, make_loop)
    return run(prepared.buffer, prepared.lengths, seed, carried)
