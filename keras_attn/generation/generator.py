"""Cached autoregressive generation for builder models."""

import numpy as np
import keras
from keras import ops

from keras_attn.generation.cached_forward import CachedForward

# Prompts are padded to a bucket so that one compiled loop serves many lengths.
PROMPT_BUCKETS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


class Generator:
    """Generates tokens from a `TransformerModel` with `application="lm"` or
    `"unilm"`, one token per step, with a key/value cache per layer.

    Each step runs the model on the newest token only (`CachedForward`):
    its keys and values are appended to each layer's cache, and its query
    attends to the cache, so a step costs one token's work instead of the
    whole prefix's, with the same logits as the full pass (float
    reordering only). With `attention_window=w` the cache is a ring of the
    keys the window can see, so memory per step is constant however long the
    generation.

    The prompts are encoded in one pass (a UniLM source bidirectionally, as
    segment 0), then the loop generates. On TensorFlow and JAX the whole loop
    is one XLA program (a while loop), compiled once per prompt bucket (the
    longest prompt rounded up to `PROMPT_BUCKETS`), batch size,
    `max_new_tokens` and sampler settings; on torch it is a Python loop
    under `torch.no_grad()`.

    Rows of a batch are independent: each row's prompt keeps its own
    length (no padding inside a sequence, so positions are those of the row
    alone), stops at `end_token_id` and after `max_new_tokens`.

    Args:
        model: the `TransformerModel` to generate with.
    """

    def __init__(self, model):
        self.forward = CachedForward(model)
        self.model = model
        self._compiled = {}

    def generate(
        self,
        prompts,
        max_new_tokens,
        sampler="greedy",
        end_token_id=None,
        min_new_tokens=0,
        seed=None,
    ):
        """Continues each prompt by up to `max_new_tokens` tokens.

        Args:
            prompts: token ids: a list of int sequences (of any lengths, at
                least 1), one sequence, a 2D int array (every row a full
                prompt), or a dict with `"token_ids"` and a `"padding_mask"`
                (1 for real tokens, right-padded), as a tokenizer gives.
                For `"unilm"` models a prompt is the source (segment 0) and
                the generated tokens are the target (segment 1).
            max_new_tokens: the most tokens generated per row.
            sampler: a `keras_attn.samplers.Sampler` or its name
                (`"greedy"`, `"random"`, `"top_k"`, `"top_p"`).
            end_token_id: a row stops after generating this id.
            min_new_tokens: `end_token_id` is not generated before this many
                tokens.
            seed: an int making a random sampler's draws reproducible.

        Returns:
            int32 numpy array `(batch, max_new_tokens)` of new tokens; a row
            that ended holds `end_token_id` and then the model's pad id.

        Raises:
            ValueError: an empty prompt, a prompt plus `max_new_tokens`
                longer than the position table, an id outside the
                vocabulary, `end_token_id` outside it, `max_new_tokens < 1`.
        """
        forward = self.forward
        from keras_attn import samplers as sampler_registry

        sampler = sampler_registry.get(sampler)
        token_ids, lengths = self._prompts(prompts)
        self._check(lengths, max_new_tokens, end_token_id, min_new_tokens)
        for row, length in zip(token_ids, lengths):
            self.model.input_contract.check_values(
                {"token_ids": np.asarray(row[:length], "int64")[None]}
            )
        batch, longest = len(lengths), int(lengths.max())
        bucket = prompt_bucket(longest, forward.max_length, max_new_tokens)
        buffer = np.full((batch, bucket + max_new_tokens), forward.pad_token_id, "int32")
        for row, length in enumerate(lengths):
            buffer[row, :length] = token_ids[row][:length]
        key = (batch, bucket, max_new_tokens, _sampler_key(sampler), end_token_id, min_new_tokens)
        run = self._compiled.get(key)
        if run is None:
            run = self._compile(sampler, end_token_id, min_new_tokens, max_new_tokens, bucket)
            self._compiled[key] = run
        seed = np.array([0 if seed is None else seed, 0], "int32")
        tokens = keras.ops.convert_to_numpy(run(buffer, lengths.astype("int32"), seed))
        out = np.full((batch, max_new_tokens), forward.pad_token_id, "int32")
        for row, length in enumerate(lengths):
            out[row] = tokens[row, length : length + max_new_tokens]
        return out

    # Checks ------------------------------------------------------------------

    def _prompts(self, prompts):
        if isinstance(prompts, dict):
            ids = np.asarray(keras.ops.convert_to_numpy(prompts["token_ids"]))
            if "padding_mask" in prompts:
                mask = np.asarray(keras.ops.convert_to_numpy(prompts["padding_mask"]))
                lengths = mask.astype(bool).sum(axis=1)
            else:
                lengths = np.full((ids.shape[0],), ids.shape[1])
            return [list(row) for row in ids], lengths
        if hasattr(prompts, "shape") or (
            isinstance(prompts, (list, tuple)) and prompts and np.isscalar(prompts[0])
        ):
            array = np.asarray(keras.ops.convert_to_numpy(prompts) if hasattr(prompts, "shape") else prompts)
            if array.ndim == 1:
                array = array[None]
            return [list(row) for row in array], np.full((array.shape[0],), array.shape[1])
        rows = [list(np.asarray(p).reshape(-1)) for p in prompts]
        return rows, np.array([len(r) for r in rows])

    def _check(self, lengths, max_new_tokens, end_token_id, min_new_tokens):
        forward = self.forward
        if len(lengths) == 0:
            raise ValueError("`prompts` is empty; give at least one prompt.")
        if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
            raise ValueError(f"`max_new_tokens` must be a positive integer; received {max_new_tokens!r}.")
        if not 0 <= min_new_tokens <= max_new_tokens:
            raise ValueError(
                f"`min_new_tokens` must be in [0, max_new_tokens={max_new_tokens}]; "
                f"received {min_new_tokens!r}."
            )
        if (lengths < 1).any():
            row = int(np.argmin(lengths))
            raise ValueError(
                f"Prompt {row} is empty; every prompt needs at least one token (a start "
                "token such as [CLS])."
            )
        if end_token_id is not None and not 0 <= end_token_id < forward.vocab_size:
            raise ValueError(
                f"`end_token_id={end_token_id}` is outside the vocabulary "
                f"(vocab_size={forward.vocab_size})."
            )
        if forward.max_length is not None:
            longest = int(lengths.max())
            if longest + max_new_tokens > forward.max_length:
                raise ValueError(
                    f"The longest prompt ({longest} tokens) plus max_new_tokens="
                    f"{max_new_tokens} exceeds the {forward.max_length} positions of the "
                    "model's position table; shorten the prompt or ask for fewer tokens."
                )

    # The loop ------------------------------------------------------------------

    def _compile(self, sampler, end_token_id, min_new_tokens, max_new_tokens, bucket):
        loop = self._loop_function(sampler, end_token_id, min_new_tokens, max_new_tokens, bucket)
        backend = keras.config.backend()
        if backend == "jax":
            import jax

            variables = self.model.variables

            def stateless(values, *args):
                with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                    return loop(*args)

            compiled = jax.jit(stateless)
            return lambda *args: compiled([v.value for v in variables], *args)
        if backend == "tensorflow":
            import tensorflow as tf

            return tf.function(loop, jit_compile=True, reduce_retracing=False)
        if backend == "torch":
            import torch

            def run(*args):
                with torch.no_grad():
                    return loop(*args)

            return run
        return loop

    def _loop_function(self, sampler, end_token_id, min_new_tokens, max_new_tokens, bucket):
        forward = self.forward
        pad = forward.pad_token_id
        unilm = not forward.causal

        def loop(tokens, lengths, seed):
            tokens = ops.convert_to_tensor(tokens, "int32")
            lengths = ops.convert_to_tensor(lengths, "int32")
            seed = ops.convert_to_tensor(seed, "int32")
            batch, total = tokens.shape
            capacity = forward.capacity(bucket, total)
            cache = forward.empty_cache(batch, capacity)
            segments = None
            if unilm:
                segments = ops.zeros((batch, bucket), "int32")
            prompt_mask = ops.arange(bucket)[None, :] < lengths[:, None]
            _, cache = forward(
                tokens[:, :bucket], 0, cache, segment_ids=segments, padding_mask=prompt_mask,
                causal=not unilm, logits=False,
            )
            limits = lengths + max_new_tokens  # each row's final length
            start = ops.min(lengths) - 1
            stop = ops.max(limits) - 1
            done = ops.zeros((batch,), "bool")

            def condition(index, tokens, cache, done):
                return ops.logical_and(index < stop, ops.logical_not(ops.all(done)))

            def body(index, tokens, cache, done):
                current = ops.slice(tokens, (0, index), (batch, 1))
                segment = None
                if unilm:
                    segment = ops.cast(ops.greater_equal(index, lengths), "int32")[:, None]
                logits, cache = forward(
                    current, index, cache, segment_ids=segment,
                    write_rows=ops.greater_equal(index, lengths),
                )
                logits = ops.cast(logits[:, 0], "float32")
                following = index + 1
                generated = following - lengths  # new tokens before this one
                if end_token_id is not None and min_new_tokens > 0:
                    early = ops.less(generated, min_new_tokens)[:, None]
                    is_end = ops.equal(ops.arange(logits.shape[-1]), end_token_id)[None]
                    logits = ops.where(ops.logical_and(early, is_end), -np.inf, logits)
                step_seed = seed + ops.stack([0, following])
                chosen = ops.cast(sampler(logits, step_seed if sampler.needs_seed else None), "int32")
                prompted = ops.slice(tokens, (0, following), (batch, 1))[:, 0]
                in_prompt = ops.less(following, lengths)
                chosen = ops.where(in_prompt, prompted, chosen)
                chosen = ops.where(done, pad, chosen)
                tokens = ops.slice_update(tokens, (0, following), chosen[:, None])
                new = ops.logical_not(in_prompt)
                finished = ops.greater_equal(following + 1, limits)
                if end_token_id is not None:
                    finished = ops.logical_or(finished, ops.equal(chosen, end_token_id))
                done = ops.logical_or(done, ops.logical_and(new, finished))
                return index + 1, tokens, cache, done

            _, tokens, _, _ = ops.while_loop(condition, body, (start, tokens, cache, done))
            return tokens

        return loop


def prompt_bucket(longest, max_length, max_new_tokens):
    """The padded prompt length: the smallest bucket holding `longest`,
    within the position table (`max_length`, None for no table)."""
    bucket = next((b for b in PROMPT_BUCKETS if b >= longest), longest)
    if max_length is not None:
        bucket = min(bucket, max_length - max_new_tokens)
    return max(bucket, longest)


def _sampler_key(sampler):
    config = sampler.get_config()
    return (type(sampler).__name__,) + tuple(sorted((k, repr(v)) for k, v in config.items()))
