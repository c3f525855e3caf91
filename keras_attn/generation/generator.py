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
        self._compiled_state = None

    def generate(
        self,
        prompts,
        max_new_tokens,
        sampler="greedy",
        end_token_id=None,
        min_new_tokens=0,
        seed=None,
        start_token_id=None,
    ):
        """Continues each prompt by up to `max_new_tokens` tokens.

        Args:
            prompts: token ids: a list of int sequences (of any lengths, at
                least 1), one sequence, a 2D int array (every row a full
                prompt), or a dict with `"token_ids"` and a `"padding_mask"`
                (1 for real tokens, right-padded), as a tokenizer gives, and
                for a model built with `conditional_layer_norm` its
                `"condition"`, float `(batch, width)` (required there).
                For `"unilm"` models a prompt is the source (segment 0) and
                the generated tokens are the target (segment 1).
            max_new_tokens: the most tokens generated per row.
            sampler: a `keras_attn.samplers.Sampler` or its name
                (`"greedy"`, `"random"`, `"top_k"`, `"top_p"`), or a
                `keras_attn.samplers.BeamSearch` (or `"beam"`), which
                returns each row's best beam (see `beam_search`).
            end_token_id: a row stops after generating this id.
            min_new_tokens: `end_token_id` is not generated before this many
                tokens.
            seed: an int making a random sampler's draws reproducible.
            start_token_id: when given, every row's first generated token is
                this id (for `"unilm"` the first target token, segment 1,
                as bert4keras's `start_id`); it counts as a generated token
                (in `max_new_tokens`, `min_new_tokens` and the output) and
                never ends a row.

        Returns:
            int32 numpy array `(batch, max_new_tokens)` of new tokens; a row
            that ended holds `end_token_id` and then the model's pad id.

        Raises:
            ValueError: an empty prompt, a prompt plus `max_new_tokens`
                longer than the position table, an id outside the
                vocabulary, `end_token_id` or `start_token_id` outside it,
                `max_new_tokens < 1`.
        """
        from keras_attn import samplers as sampler_registry

        sampler = sampler_registry.get(sampler)
        if isinstance(sampler, sampler_registry.BeamSearch):
            sequences, _ = self.beam_search(
                prompts, max_new_tokens, sampler.num_beams, sampler.length_penalty,
                end_token_id=end_token_id, min_new_tokens=min_new_tokens,
                start_token_id=start_token_id,
            )
            return sequences[:, 0]
        buffer, lengths, bucket, condition = self._prepare(
            prompts, max_new_tokens, end_token_id, min_new_tokens, start_token_id
        )
        settings = (_sampler_key(sampler), end_token_id, min_new_tokens, start_token_id)
        run = self._compiled_loop(
            ("sample", buffer.shape, bucket, max_new_tokens, condition is None) + settings,
            lambda: self._sampling_loop(
                sampler, end_token_id, min_new_tokens, max_new_tokens, bucket, start_token_id
            ),
        )
        seed = np.array([0 if seed is None else seed, 0], "int32")
        tokens = keras.ops.convert_to_numpy(run(buffer, lengths, seed, condition))
        return _new_tokens(tokens, lengths, max_new_tokens)

    def beam_search(
        self,
        prompts,
        max_new_tokens,
        num_beams,
        length_penalty=0.0,
        end_token_id=None,
        min_new_tokens=0,
        start_token_id=None,
    ):
        """The `num_beams` best continuations of each prompt by beam search.

        The search runs on device for the whole batch at once, cached and
        compiled like `generate`'s sampling loop: the batch is flattened to
        `batch * num_beams` rows (the prompt is encoded once per prompt and
        its cache copied to the beams), and each step reorders the rows'
        caches with `DecodingCache.select_rows`.

        The algorithm, exactly:

        - a beam's score is the sum of the float32 `log_softmax` of the
          logits at the tokens it generated (the end token included; a
          forced `start_token_id` adds 0);
        - at the first generated step only beam 0 of a row is live (the
          others start at score -inf), so beams never duplicate;
        - each step, every unfinished beam proposes every vocabulary token
          (score + log-probability; `end_token_id` at -inf before
          `min_new_tokens` generated tokens); a finished beam proposes
          exactly one candidate, itself extended by the pad id, score
          unchanged; the `num_beams` best of the row's
          `num_beams * vocab_size` candidates become the new beams (ties go
          to the lowest flat index `beam * vocab_size + token`);
        - a beam finishes when it generates `end_token_id` or has
          `max_new_tokens` tokens; the loop stops when every beam of every
          row has finished;
        - the beams are returned in the order of
          `score / length ** length_penalty` (length: the tokens the beam
          generated, end token included), descending, ties to the lower
          beam index; `scores` are these normalised scores;
        - a row whose prompt is longer than the shortest one reads its
          prompt while other rows decode: its beams take the prompt token,
          scores unchanged, only beam 0 live.

        Unlike Hugging Face's beam search (and bert4keras's), finished
        beams stay among the `num_beams` beams instead of moving to a
        separate list of finished hypotheses, so a row keeps exactly
        `num_beams` candidates and the search ends when all have finished;
        bert4keras's `AutoRegressiveDecoder.beam_search` also returns as
        soon as its best-scoring beam ends, while this search continues
        until every beam has ended (the best sequence can differ when
        `length_penalty != 0` or a later beam overtakes).

        Args:
            prompts, max_new_tokens, end_token_id, min_new_tokens,
            start_token_id: as for `generate`.
            num_beams: an integer >= 1; 1 is greedy decoding.
            length_penalty: a finite number, the exponent of the length in
                the final ranking.

        Returns:
            `(sequences, scores)`: int32 numpy `(batch, num_beams,
            max_new_tokens)`, best first (a finished beam is padded with the
            pad id), and float32 numpy `(batch, num_beams)`, the normalised
            scores in the same order.

        Raises:
            ValueError: as `generate`, and `num_beams` not an integer >= 1.
        """
        from keras_attn.samplers import BeamSearch

        settings = BeamSearch(num_beams, length_penalty)
        num_beams = settings.num_beams
        buffer, lengths, bucket, condition = self._prepare(
            prompts, max_new_tokens, end_token_id, min_new_tokens, start_token_id
        )
        run = self._compiled_loop(
            ("beam", buffer.shape, bucket, max_new_tokens, num_beams, end_token_id,
             min_new_tokens, start_token_id, condition is None),
            lambda: self._beam_loop(
                num_beams, end_token_id, min_new_tokens, max_new_tokens, bucket, start_token_id
            ),
        )
        tokens, scores, beam_lengths = (
            keras.ops.convert_to_numpy(x) for x in run(buffer, lengths, condition)
        )
        batch = len(lengths)
        sequences = _new_tokens(tokens, np.repeat(lengths, num_beams), max_new_tokens)
        sequences = sequences.reshape(batch, num_beams, max_new_tokens)
        penalty = beam_lengths.astype("float32") ** np.float32(settings.length_penalty)
        normalised = (scores.astype("float32") / penalty).astype("float32")
        order = np.argsort(-normalised, axis=1, kind="stable")
        return (
            np.take_along_axis(sequences, order[:, :, None], axis=1),
            np.take_along_axis(normalised, order, axis=1),
        )

    def _prepare(self, prompts, max_new_tokens, end_token_id, min_new_tokens, start_token_id):
        """The checked prompts as an int32 buffer `(batch, bucket +
        max_new_tokens)` (pad id after each prompt), their int32 lengths, the
        bucket and the float32 `condition` rows (None for a model without
        conditional LayerNorms)."""
        forward = self.forward
        token_ids, lengths = self._prompts(prompts)
        condition = self._condition(prompts, len(lengths))
        self._check(lengths, max_new_tokens, end_token_id, min_new_tokens, start_token_id)
        for row, length in zip(token_ids, lengths):
            self.model.input_contract.check_values(
                {"token_ids": np.asarray(row[:length], "int64")[None]}
            )
        batch, longest = len(lengths), int(lengths.max())
        bucket = prompt_bucket(longest, forward.max_length, max_new_tokens)
        buffer = np.full((batch, bucket + max_new_tokens), forward.pad_token_id, "int32")
        for row, length in enumerate(lengths):
            buffer[row, :length] = token_ids[row][:length]
        return buffer, lengths.astype("int32"), bucket, condition

    def _condition(self, prompts, batch):
        """The checked `condition` of dict prompts, float32 `(batch, width)`."""
        given = isinstance(prompts, dict) and "condition" in prompts
        if not self.forward.conditional:
            if given:
                raise ValueError(
                    f"{self.model.name} takes no `condition` (it has no conditional "
                    "LayerNorms); drop the key."
                )
            return None
        if not given:
            raise ValueError(
                f"{self.model.name} was built with conditional_layer_norm=...: give the "
                'prompts as a dict with "token_ids" and "condition" (one row per prompt).'
            )
        condition = np.asarray(keras.ops.convert_to_numpy(prompts["condition"]), "float32")
        width = self.model.input_contract.vectors["condition"]
        if condition.shape != (batch, width):
            raise ValueError(
                f"The prompts' `condition` must be (batch, width) = ({batch}, {width}), "
                f"one row per prompt; received shape {condition.shape}."
            )
        if not np.all(np.isfinite(condition)):
            raise ValueError("The prompts' `condition` holds a non-finite value.")
        return condition

    # Checks ------------------------------------------------------------------

    def _prompts(self, prompts):
        if isinstance(prompts, dict):
            unknown = sorted(set(prompts) - {"token_ids", "padding_mask", "condition"})
            if unknown:
                raise ValueError(
                    f"Prompt dicts take 'token_ids', 'padding_mask' and (for conditional "
                    f"LayerNorms) 'condition'; received the unknown keys {unknown}."
                )
            ids = np.asarray(keras.ops.convert_to_numpy(prompts["token_ids"]))
            if "padding_mask" in prompts:
                mask = np.asarray(keras.ops.convert_to_numpy(prompts["padding_mask"])).astype(bool)
                lengths = mask.sum(axis=1)
                right_padded = mask == (np.arange(mask.shape[1])[None] < lengths[:, None])
                if not right_padded.all():
                    row = int(np.argmin(right_padded.all(axis=1)))
                    raise ValueError(
                        f"Prompt {row}'s `padding_mask` is not right-padded (real tokens "
                        "first, then padding); generation continues each prompt after its "
                        "last real token, so pad prompts on the right."
                    )
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

    def _check(self, lengths, max_new_tokens, end_token_id, min_new_tokens, start_token_id):
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
        for name, token in (("end_token_id", end_token_id), ("start_token_id", start_token_id)):
            if token is not None and not 0 <= token < forward.vocab_size:
                raise ValueError(
                    f"`{name}={token}` is outside the vocabulary "
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

    # The loops -----------------------------------------------------------------

    def _compiled_loop(self, key, make_loop):
        """The loop for `key`, compiled on first use: an XLA program on JAX
        and TensorFlow, a loop under `torch.no_grad()` on torch.

        A compiled program captures which variables the model has (LoRA
        adapters, quantized kernels), so when `model_state` changes (after
        `enable_lora`, `merge_lora`, `quantize`) every program is dropped
        and the next call compiles one for the model as it is now."""
        state = model_state(self.model)
        if state != self._compiled_state:
            self._compiled, self._compiled_state = {}, state
        if key not in self._compiled:
            self._compiled[key] = self._compile(make_loop())
        return self._compiled[key]

    def _compile(self, loop):
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

    def _prefill(self, tokens, lengths, bucket, condition=None):
        """The cache after encoding the prompts `tokens[:, :bucket]`, of
        `lengths` tokens each, in one pass (a UniLM source bidirectionally,
        as segment 0)."""
        forward = self.forward
        batch, total = tokens.shape
        cache = forward.empty_cache(batch, forward.capacity(bucket, total))
        prompt_mask = ops.arange(bucket)[None, :] < lengths[:, None]
        _, cache = forward(
            tokens[:, :bucket], 0, cache, padding_mask=prompt_mask, logits=False,
            condition=condition,
        )
        return cache

    def _next_logits(self, tokens, index, lengths, cache, condition=None):
        """Float32 logits `(rows, vocab)` for the token after position
        `index`, and the cache with the token at `index` written (for rows
        past their prompt; the prefill wrote the prompts)."""
        current = ops.slice(tokens, (0, index), (tokens.shape[0], 1))
        generating = ops.greater_equal(index, lengths)
        segment = None
        if not self.forward.causal:
            segment = ops.cast(generating, "int32")[:, None]
        logits, cache = self.forward(
            current, index, cache, segment_ids=segment, write_rows=generating,
            condition=condition,
        )
        return ops.cast(logits[:, 0], "float32"), cache

    def _sampling_loop(self, sampler, end_token_id, min_new_tokens, max_new_tokens, bucket,
                       start_token_id):
        pad = self.forward.pad_token_id

        def loop(tokens, lengths, seed, condition):
            tokens = ops.convert_to_tensor(tokens, "int32")
            lengths = ops.convert_to_tensor(lengths, "int32")
            seed = ops.convert_to_tensor(seed, "int32")
            if condition is not None:
                condition = ops.convert_to_tensor(condition, "float32")
            batch = tokens.shape[0]
            cache = self._prefill(tokens, lengths, bucket, condition)
            limits = lengths + max_new_tokens  # each row's final length
            done = ops.zeros((batch,), "bool")

            def body(index, tokens, cache, done):
                logits, cache = self._next_logits(tokens, index, lengths, cache, condition)
                following = index + 1
                logits = _forbid_early_end(logits, following - lengths, end_token_id, min_new_tokens)
                step_seed = seed + ops.stack([0, following])
                chosen = ops.cast(sampler(logits, step_seed if sampler.needs_seed else None), "int32")
                forced, forced_token = _forced_tokens(tokens, following, lengths, start_token_id)
                chosen = ops.where(forced, forced_token, chosen)
                chosen = ops.where(done, pad, chosen)
                tokens = ops.slice_update(tokens, (0, following), chosen[:, None])
                finished = _finishes(chosen, forced, following, lengths, limits, end_token_id)
                return index + 1, tokens, cache, ops.logical_or(done, finished)

            return _run_steps(body, lengths, limits, (tokens, cache, done))[0]

        return loop

    def _beam_loop(self, num_beams, end_token_id, min_new_tokens, max_new_tokens, bucket,
                   start_token_id):
        pad = self.forward.pad_token_id
        vocab = self.forward.vocab_size

        def loop(prompt_tokens, prompt_lengths, prompt_condition):
            prompt_tokens = ops.convert_to_tensor(prompt_tokens, "int32")
            prompt_lengths = ops.convert_to_tensor(prompt_lengths, "int32")
            batch = prompt_tokens.shape[0]
            rows = batch * num_beams
            # Row `b * num_beams + k` is beam k of prompt b.
            beam_rows = ops.repeat(ops.arange(batch, dtype="int32"), num_beams)
            condition = None
            if prompt_condition is not None:
                prompt_condition = ops.convert_to_tensor(prompt_condition, "float32")
                condition = ops.take(prompt_condition, beam_rows, axis=0)
            cache = self._prefill(
                prompt_tokens, prompt_lengths, bucket, prompt_condition
            ).select_rows(beam_rows)
            tokens = ops.take(prompt_tokens, beam_rows, axis=0)
            lengths = ops.take(prompt_lengths, beam_rows, axis=0)
            limits = lengths + max_new_tokens
            first_live = ops.equal(ops.arange(num_beams), 0)[None]
            scores = ops.where(first_live, 0.0, -np.inf) * ops.ones((batch, 1), "float32")
            done = ops.zeros((rows,), "bool")
            beam_lengths = ops.zeros((rows,), "int32")
            row_offsets = ops.arange(batch, dtype="int32")[:, None] * num_beams

            def body(index, tokens, cache, done, scores, beam_lengths):
                logits, cache = self._next_logits(tokens, index, lengths, cache, condition)
                following = index + 1
                log_probs = ops.log_softmax(logits, axis=-1)
                log_probs = _forbid_early_end(
                    log_probs, following - lengths, end_token_id, min_new_tokens
                )
                candidates = scores[:, :, None] + ops.reshape(log_probs, (batch, num_beams, vocab))
                only_pad = ops.where(ops.equal(ops.arange(vocab), pad), scores[:, :, None], -np.inf)
                done_beams = ops.reshape(done, (batch, num_beams))[:, :, None]
                candidates = ops.reshape(
                    ops.where(done_beams, only_pad, candidates), (batch, num_beams * vocab)
                )
                best = _best_indices(candidates, num_beams)
                source = best // vocab
                chosen = ops.reshape(best % vocab, (rows,))
                new_scores = ops.take_along_axis(candidates, best, axis=1)
                # Rows reading their prompt, or taking the start token, keep their beams.
                forced, forced_token = _forced_tokens(tokens, following, lengths, start_token_id)
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
                finished = _finishes(chosen, forced, following, lengths, limits, end_token_id)
                done = ops.logical_or(was_done, finished)
                return index + 1, tokens, cache, done, scores, beam_lengths

            tokens, _, _, scores, beam_lengths = _run_steps(
                body, lengths, limits, (tokens, cache, done, scores, beam_lengths)
            )
            return tokens, scores, ops.reshape(beam_lengths, (batch, num_beams))

        return loop


def _run_steps(body, lengths, limits, state):
    """Runs `body(index, tokens, cache, done, ...)` from the last token of
    the shortest prompt until every row is done or full; returns the final
    state without the index. `state` starts with `(tokens, cache, done)`."""

    def condition(index, tokens, cache, done, *rest):
        return ops.logical_and(index < ops.max(limits) - 1, ops.logical_not(ops.all(done)))

    return ops.while_loop(condition, body, (ops.min(lengths) - 1,) + tuple(state))[1:]


def _forbid_early_end(logits, generated, end_token_id, min_new_tokens):
    """`logits` `(rows, vocab)` with `end_token_id` at -inf in rows that
    have generated fewer than `min_new_tokens` tokens (`generated`)."""
    if end_token_id is None or min_new_tokens == 0:
        return logits
    early = ops.less(generated, min_new_tokens)[:, None]
    is_end = ops.equal(ops.arange(logits.shape[-1]), end_token_id)[None]
    return ops.where(ops.logical_and(early, is_end), -np.inf, logits)


def _forced_tokens(tokens, following, lengths, start_token_id):
    """`(forced, token)`, both `(rows,)`: the rows whose token at position
    `following` is not chosen by the model (their prompt's, or the start
    token as their first generated one) and that token."""
    token = ops.slice(tokens, (0, following), (tokens.shape[0], 1))[:, 0]
    forced = ops.less(following, lengths)
    if start_token_id is not None:
        starts = ops.equal(following, lengths)
        token = ops.where(starts, start_token_id, token)
        forced = ops.logical_or(forced, starts)
    return forced, token


def _finishes(chosen, forced, following, lengths, limits, end_token_id):
    """Rows past their prompt whose token at `following` ends them: their
    last allowed token, or a generated (not forced) `end_token_id`."""
    finished = ops.greater_equal(following + 1, limits)
    if end_token_id is not None:
        ends = ops.logical_and(ops.equal(chosen, end_token_id), ops.logical_not(forced))
        finished = ops.logical_or(finished, ends)
    return ops.logical_and(ops.greater_equal(following, lengths), finished)


def _best_indices(scores, count):
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


def _new_tokens(tokens, lengths, max_new_tokens):
    """The `max_new_tokens` tokens after each row's prompt."""
    return np.stack([row[length : length + max_new_tokens] for row, length in zip(tokens, lengths)])


def prompt_bucket(longest, max_length, max_new_tokens):
    """The padded prompt length: the smallest bucket holding `longest`,
    within the position table (`max_length`, None for no table)."""
    bucket = next((b for b in PROMPT_BUCKETS if b >= longest), longest)
    if max_length is not None:
        bucket = min(bucket, max_length - max_new_tokens)
    return max(bucket, longest)


def model_state(model):
    """What a compiled decoding loop depends on besides its inputs: the
    identity of every variable (`enable_lora` adds variables, `merge_lora`
    removes them, `quantize` replaces kernels by integer ones and scales).
    Values are read at run time, so training needs no new program."""
    return tuple(id(variable) for variable in model.variables)


def _sampler_key(sampler):
    config = sampler.get_config()
    return (type(sampler).__name__,) + tuple(sorted((k, repr(v)) for k, v in config.items()))
