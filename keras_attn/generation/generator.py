"""Cached autoregressive generation for builder models: the orchestration
of prompts (`prompts`), the model's step (`CachedForward`), the sampler's
loop (`keras_attn.samplers`) and its compilation."""

import keras
import numpy as np
from keras import ops

from keras_attn import progress
from keras_attn.generation.cached_forward import CachedForward
from keras_attn.generation.prompts import new_tokens
from keras_attn.generation.prompts import prepare_prompts
from keras_attn.samplers import decoding_loop
from keras_attn.samplers.decoding_loop import DecodingSettings
from keras_attn.torch_runtime.compiled_step import CompiledStep
from keras_attn.torch_runtime.compiled_step import torch_compile_mode
from keras_attn.torch_runtime.compiled_step import torch_compiles_steps


class Generator:
    """Generates tokens from a `TransformerModel` with `application="lm"` or
    `"unilm"`, one token per step, with a key/value cache per layer.

    Each step runs the model on the newest token only (`CachedForward`),
    appending its keys and values to each layer's cache, with the logits of
    the full pass. With `attention_window=w` the cache is a ring of `w` slots
    (plus `k` slots for `attention_sink_tokens=k`), so memory per step is
    constant. The prompts are encoded in one pass (a UniLM source as segment
    0), then the sampler's loop runs: one XLA program on TensorFlow and JAX,
    compiled once per prompt bucket (`prompts.PROMPT_BUCKETS`), batch size,
    `max_new_tokens` and sampler; on torch a Python loop whose step is
    compiled (`CompiledStep`). Rows are independent: each keeps its own
    positions and stops at `end_token_id` or after `max_new_tokens`. See
    docs/generation.md.

    Args:
        model: the `TransformerModel` to generate with.
    """
    def __init__(self, model):
        self.forward = CachedForward(model)
        self.model = model
        self._compiled = {}
        self._compiled_state = None
        self._step = None

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
            prompts: token ids: a list of int sequences (any lengths, at least
                1), one sequence, a 2D int array, or a dict with `"token_ids"`
                and a right-padded `"padding_mask"` (1 for real tokens), and for
                a `conditional_layer_norm` model its float `"condition"` `(batch,
                width)`. For `"unilm"` models a prompt is the source (segment 0)
                and the generated tokens the target (segment 1); a dict's
                `"segment_ids"` may end a prompt with the target's start (e.g.
                `[0, 0, 0, 1, 1]`), which the generated tokens continue.
            max_new_tokens: the most tokens generated per row.
            sampler: a `keras_attn.samplers.Sampler` or its name (`"greedy"`,
                `"random"`, `"top_k"`, `"top_p"`), or a
                `keras_attn.samplers.BeamSearch` (or `"beam"`), which returns each
                row's best beam.
            end_token_id: a row stops after generating this id.
            min_new_tokens: `end_token_id` is not generated before this many tokens.
            seed: an int for a random sampler (the same seed, the same tokens);
                None draws one from numpy's global generator on every call.
            start_token_id: when given, every row's first generated token (counted
                in `max_new_tokens`, `min_new_tokens` and the output; it never
                ends a row).

        Returns:
            int32 numpy array `(batch, max_new_tokens)`; a row that ended holds
            `end_token_id` and then the model's pad id.

        Raises:
            TypeError: text instead of token ids.
            ValueError: an empty or non-flat prompt, ragged array rows, a prompt
                plus `max_new_tokens` longer than the position table, ids,
                `end_token_id` or `start_token_id` outside the vocabulary,
                `max_new_tokens` not an integer >= 1, `min_new_tokens` outside
                `[0, max_new_tokens]`, sequences beyond int32 positions or the
                machine's memory, a seed not an int32, a `padding_mask` or
                `segment_ids` of another shape or layout, a `BeamSearch` with more
                beams than the vocabulary.
        """
        from keras_attn import samplers

        sampler = samplers.get(sampler)
        if isinstance(sampler, samplers.BeamSearch):
            sequences, _ = self.beam_search(
                prompts, max_new_tokens, sampler.num_beams, sampler.length_penalty,
                end_token_id=end_token_id, min_new_tokens=min_new_tokens,
                start_token_id=start_token_id, early_stopping=sampler.early_stopping,
            )
            return sequences[:, 0]
        prepared, settings = self._prepare(
            prompts, max_new_tokens, end_token_id, min_new_tokens, start_token_id
        )
        tokens = self._run(sampler, prepared, settings, decoding_seed(seed, sampler))
        return new_tokens(keras.ops.convert_to_numpy(tokens), prepared.lengths, max_new_tokens)

    def beam_search(
        self,
        prompts,
        max_new_tokens,
        num_beams,
        length_penalty=0.0,
        end_token_id=None,
        min_new_tokens=0,
        start_token_id=None,
        early_stopping=False,
    ):
        """The `num_beams` best continuations of each prompt by beam search.

        The search (`keras_attn.samplers.BeamSearch.run_loop`) runs for the
        whole batch at once, cached and compiled as `generate`'s loop, on
        `batch * num_beams` rows. A beam's score is the sum of the float32
        `log_softmax` at its generated tokens; ties go to the lowest flat index
        `beam * vocab_size + token`. `early_stopping` False, True and `"never"`
        are transformers' beam search step for step; `"all_finished"` keeps
        finished beams among the beams until all have ended. The modes are
        described in docs/generation.md (Beam search).

        Args:
            prompts, max_new_tokens, end_token_id, min_new_tokens: as for
                `generate`.
            start_token_id: as for `generate`.
            num_beams: an integer >= 1; 1 is greedy decoding.
            length_penalty: a finite number, the exponent of the length in the
                ranking `score / length ** length_penalty`.
            early_stopping: False, True, `"never"` or `"all_finished"`.

        Returns:
            `(sequences, scores)`: int32 numpy `(batch, num_beams,
            max_new_tokens)`, best first (a finished beam padded with the pad
            id), and float32 numpy `(batch, num_beams)`, the normalised scores.

        Raises:
            ValueError: as `generate`, and `num_beams` not an integer >= 1 or
                above the vocabulary size.
        """
        from keras_attn.samplers import BeamSearch

        search = BeamSearch(num_beams, length_penalty, early_stopping)
        num_beams = search.num_beams
        if num_beams > self.forward.vocab_size:
            raise ValueError(
                f"BeamSearch(num_beams={num_beams}) asks for more beams than the model's "
                f"vocabulary has tokens (vocab_size={self.forward.vocab_size}); every beam "
                f"needs a distinct first token: use num_beams <= {self.forward.vocab_size}."
            )
        prepared, settings = self._prepare(
            prompts, max_new_tokens, end_token_id, min_new_tokens, start_token_id
        )
        tokens, scores, beam_lengths = (
            keras.ops.convert_to_numpy(x)
            for x in self._run(search, prepared, settings, np.zeros((2,), "int32"))
        )
        lengths = prepared.lengths
        batch = len(lengths)
        sequences = new_tokens(tokens, np.repeat(lengths, num_beams), max_new_tokens)
        sequences = sequences.reshape(batch, num_beams, max_new_tokens)
        if search.keeps_finished_beams:
            penalty = beam_lengths.astype("float32") ** np.float32(search.length_penalty)
            normalised = (scores.astype("float32") / penalty).astype("float32")
        else:
            normalised = scores.astype("float32")  # normalised as each hypothesis finished
        order = np.argsort(-normalised, axis=1, kind="stable")
        return (
            np.take_along_axis(sequences, order[:, :, None], axis=1),
            np.take_along_axis(normalised, order, axis=1),
        )

    def _prepare(self, prompts, max_new_tokens, end_token_id, min_new_tokens, start_token_id):
        prepared = prepare_prompts(
            self.forward, prompts, max_new_tokens, end_token_id, min_new_tokens, start_token_id
        )
        settings = DecodingSettings(
            max_new_tokens, self.forward.pad_token_id, end_token_id, min_new_tokens,
            start_token_id,
        )
        return prepared, settings

    def _run(self, sampler, prepared, settings, seed):
        """`sampler.run_loop` over the prepared prompts, in the loop compiled
        for this sampler, these settings and the buffer's shape."""
        source_shape = None if prepared.source is None else prepared.source.shape
        key = (
            _sampler_key(sampler), settings, prepared.buffer.shape, prepared.bucket,
            prepared.condition is None, source_shape,
        )
        run = self._compiled_loop(key, lambda: self._loop(sampler, settings, prepared.bucket))
        return run(
            prepared.buffer, prepared.lengths, seed, prepared.condition, prepared.source,
            prepared.source_mask, prepared.target_starts,
        )

    def _loop(self, sampler, settings, bucket):
        """The decoding program: encode the prompts, then the sampler's loop."""
        forward = self.forward

        def loop(tokens, lengths, seed, condition, source, source_mask, target_starts):
            tokens = ops.convert_to_tensor(tokens, "int32")
            lengths = ops.convert_to_tensor(lengths, "int32")
            if target_starts is not None:
                target_starts = ops.convert_to_tensor(target_starts, "int32")
            seed = ops.convert_to_tensor(seed, "int32")
            if condition is not None:
                condition = ops.convert_to_tensor(condition, "float32")
            encoded = None
            if source is not None:
                # An encoder-decoder encodes each source once.
                encoded = forward.encode_source(
                    ops.convert_to_tensor(source, "int32"),
                    ops.convert_to_tensor(source_mask, "int32"),
                )
            cache = forward.empty_cache(tokens.shape[0], forward.capacity(bucket, tokens.shape[1]))
            prompt_mask = ops.arange(bucket)[None, :] < lengths[:, None]
            segment_ids = None
            if forward.unilm:
                # UniLM's layout: the source is segment 0, a target prefix 1.
                in_target = ops.arange(bucket)[None, :] >= target_starts[:, None]
                segment_ids = ops.cast(ops.logical_and(prompt_mask, in_target), "int32")

            def prompt_pass(width):
                return forward(
                    tokens[:, :width], 0, cache,
                    segment_ids=None if segment_ids is None else segment_ids[:, :width],
                    padding_mask=prompt_mask[:, :width], logits=False, condition=condition,
                    source=encoded,
                )[1]

            switch = forward.recompute_length
            if switch is not None and bucket > switch:
                # A LongRoPE batch whose shortest prompt ends within the
                # original length: its first `switch` positions are encoded
                # short, as each such row alone; the step at `switch`
                # encodes the longer prompts whole, long (`recomputing_step`).
                cache = ops.cond(
                    ops.less_equal(ops.min(lengths), switch),
                    lambda: prompt_pass(switch), lambda: prompt_pass(bucket),
                )
            else:
                cache = prompt_pass(bucket)
            if self._step is not None:
                self._step.new_run(self.model)
            step = DecodingStep(
                forward, lengths, condition, encoded, self._step, target_starts, bucket
            )
            return sampler.run_loop(step, tokens, lengths, cache, settings, seed)

        return loop

    def _compiled_loop(self, key, make_loop):
        """The loop for `key`, compiled on first use (`compile_loop`); every
        program is dropped when `model_state` changes."""
        state = model_state(self.model)
        if not same_state(state, self._compiled_state):
            self._compiled, self._compiled_state = {}, state
            self._step = (
                CompiledStep(decoding_step, torch_compile_mode()) if torch_compiles_steps() else None
            )
        if key not in self._compiled:
            self._compiled[key] = announce_first_call(compile_loop(make_loop(), self.model))
        return self._compiled[key]


class DecodingStep:
    """The step a sampler's loop calls: `step(tokens, index, cache)` gives the
    float32 logits `(rows, vocab)` of the token after position `index` and
    the cache with that token written for rows past their prompt. For a
    UniLM model a row's tokens are segment 1 from its `target_starts` on.
    Given `pick=(function, args)` it returns `function(logits, index, tokens,
    *args)` instead (a sampler's `next_tokens`), in the same program.

    `run` is `decoding_step` or its compiled form (`CompiledStep`, torch);
    `prompt_width` is the prompt buffer's width (see `recomputing_step`)."""

    def __init__(self, forward, lengths, condition=None, source=None, run=None,
                 target_starts=None, prompt_width=0):
        self.forward = forward
        self.lengths = lengths
        self.condition = condition
        self.source = source
        self.run = decoding_step if run is None else run
        self.target_starts = target_starts
        self.prompt_width = prompt_width

    def __call__(self, tokens, index, cache, pick=None):
        arguments = (
            self.forward, tokens, index, cache, self.lengths, self.condition, self.source, pick,
            self.target_starts,
        )
        length = self.forward.recompute_length
        if length is None or length + 1 >= tokens.shape[1]:
            return self.run(*arguments)
        return ops.cond(
            ops.equal(index, length),
            lambda: recomputing_step(*arguments, width=self.prompt_width),
            lambda: self.run(*arguments),
        )

    def select_rows(self, rows):
        """The step of the rows `rows` (int `(new_rows,)`), e.g. beams."""
        def take(value):
            return None if value is None else ops.take(value, rows, axis=0)

        source = None if self.source is None else self.source.select_rows(rows)
        return DecodingStep(
            self.forward, take(self.lengths), take(self.condition), source, self.run,
            take(self.target_starts), self.prompt_width,
        )


def decoding_step(forward, tokens, index, cache, lengths, condition=None, source=None,
                  pick=None, target_starts=None):
    """One decoding step (see `DecodingStep`): a function of tensors (and
    the model's `CachedForward`, the sampler's `pick`), so that torch can
    compile it whole, the sampler's choice of the token included."""
    index = ops.convert_to_tensor(index, "int32")
    current = ops.take(tokens, ops.reshape(index, (1,)), axis=1)
    generating = ops.greater_equal(index, lengths)
    segment_ids = None
    if forward.unilm:
        starts = lengths if target_starts is None else target_starts
        segment_ids = ops.cast(ops.greater_equal(index, starts), "int32")[:, None]
    logits, cache = forward(
        current, index, cache, segment_ids=segment_ids, write_rows=generating,
        condition=condition, source=source,
    )
    logits = ops.cast(logits[:, 0], "float32")
    return decoding_loop.picked(pick, logits, index, tokens), cache


def recomputing_step(forward, tokens, index, cache, lengths, condition=None, source=None,
                     pick=None, target_starts=None, width=0):
    """The decoding step at position `L = forward.recompute_length` of a
    LongRoPE model: the first `max(L + 1, width)` tokens encoded again in one
    pass (so the long factors apply to every position), their keys and
    values written over the cache's, and the logits at `L`, as transformers'
    Phi-3 drops its cache past `L`. Later steps are ordinary ones."""
    length = max(forward.recompute_length + 1, width)
    logits, cache = forward(tokens[:, :length], 0, cache, condition=condition, source=source)
    logits = ops.cast(logits[:, forward.recompute_length], "float32")
    return decoding_loop.picked(pick, logits, index, tokens), cache


def decoding_seed(seed, sampler):
    """The int32 `(2,)` seed `[seed, 0]` of a sampler's loop; for `seed=None`
    drawn from numpy's global generator when the sampler `needs_seed`."""
    if seed is None:
        seed = int(np.random.randint(2**31 - 1)) if sampler.needs_seed else 0
    if (
        not isinstance(seed, (int, np.integer))
        or isinstance(seed, bool)
        or not -(2**31) <= seed < 2**31
    ):
        raise ValueError(
            f"`seed` must be None or an integer in [-2**31, 2**31); received seed={seed!r}."
        )
    return np.array([seed, 0], "int32")


def compile_loop(loop, model):
    """`loop` as one program: `jax.jit` over the model's variables on JAX,
    `tf.function(jit_compile=True)` on TensorFlow (both XLA); on torch an
    eager loop under `torch.no_grad()`."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        variables = model.variables

        def stateless(values, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return loop(*args)

        compiled = jax.jit(stateless)
        return lambda *args: compiled([v.value for v in variables], *args)
    if backend == "tensorflow":
        import functools

        import tensorflow as tf

        # Each program is traced once, by design (one per prompt bucket and
        # settings), but tf.function counts traces per Python code object:
        # every `loop` closure shares `Generator._loop`'s, so a fifth bucket
        # would log a retracing warning. A `partial` has no code object of
        # its own, so TensorFlow counts each program's traces apart.
        return tf.function(functools.partial(loop), jit_compile=True, reduce_retracing=False)
    if backend == "torch":
        import torch

        def run(*args):
            with torch.no_grad():
                return loop(*args)

        return run
    return loop


def announce_first_call(program):
    """`program` whose first (compiling) call says so when slow
    (`keras_attn.progress.announced_if_slow`)."""
    if keras.config.backend() == "torch" and torch_compile_mode() != "always":
        return program  # eager, or compiled later and announced then
    compiler = "torch.compile" if keras.config.backend() == "torch" else "XLA"
    first = [True]

    def run(tokens, *args):
        if not first[0]:
            return program(tokens, *args)
        first[0] = False
        rows, positions = tokens.shape
        what = (
            f"compiling the decoding program for batch {rows}, {positions} positions "
            f"({compiler}; once per shape, later calls reuse it)"
        )
        with progress.announced_if_slow(what, done="compiled and ran the first call"):
            return program(tokens, *args)

    return run


def model_state(model):
    """What a compiled decoding loop depends on besides its inputs: the
    variables themselves (`enable_lora`, `merge_lora` and `quantize` change
    them), held so that a dropped variable's id is never reused."""
    return tuple(model.variables)


def same_state(state, other):
    """Whether two `model_state`s hold the same variables (by identity)."""
    return (
        other is not None
        and len(state) == len(other)
        and all(a is b for a, b in zip(state, other))
    )


def _sampler_key(sampler):
    config = sampler.get_config()
    return (type(sampler).__name__,) + tuple(sorted((k, repr(v)) for k, v in config.items()))
