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

    Each step runs the model on the newest token only (`CachedForward`):
    its keys and values are appended to each layer's cache, and its query
    attends to the cache, so a step costs one token's work instead of the
    whole prefix's, with the same logits as the full pass (float
    reordering only). With `attention_window=w` the cache is a ring of the
    keys the window can see, so memory per step is constant however long the
    generation. A model built with `attention_sink_tokens=k` beside its
    window (StreamingLLM's sink tokens, see `keras_attn.MultiHeadAttention`)
    keeps the first `k` positions in `k` slots of their own before the
    ring: `k + w` slots (or the prompt's length, if longer), whatever the
    length generated, and still the logits of the model's full pass.

    The prompts are encoded in one pass (a UniLM source bidirectionally, as
    segment 0), then the loop generates. On TensorFlow and JAX the whole loop
    is one XLA program (a while loop), compiled once per prompt bucket (the
    longest prompt rounded up to `prompts.PROMPT_BUCKETS`; under `dynamic`
    or `longrope` rope scaling, which read the length encoded, the longest prompt's own
    length, so such a model compiles once per prompt length), batch size,
    `max_new_tokens` and sampler settings; on torch it is a Python loop
    under `torch.no_grad()` whose step is compiled by `torch.compile`
    (`CompiledStep`, once per shape).

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
            prompts: token ids: a list of int sequences (of any lengths, at
                least 1), one sequence, a 2D int array (every row a full
                prompt), or a dict with `"token_ids"` and a `"padding_mask"`
                (1 for real tokens, right-padded), as a tokenizer gives, and
                for a model built with `conditional_layer_norm` its
                `"condition"`, float `(batch, width)` (required there).
                For `"unilm"` models a prompt is the source (segment 0) and
                the generated tokens are the target (segment 1); a dict's
                `"segment_ids"` (like its `"token_ids"`) may end a prompt
                with the start of the target, 1s after the source's 0s
                (e.g. `[0, 0, 0, 1, 1]`, bert4keras's question generation
                after a sampled answer), which the generated tokens
                continue: the same as the full pass over the same ids and
                segments. Other models take segment 0 only.
            max_new_tokens: the most tokens generated per row.
            sampler: a `keras_attn.samplers.Sampler` or its name
                (`"greedy"`, `"random"`, `"top_k"`, `"top_p"`), or a
                `keras_attn.samplers.BeamSearch` (or `"beam"`), which
                returns each row's best beam (see `beam_search`).
            end_token_id: a row stops after generating this id.
            min_new_tokens: `end_token_id` is not generated before this many
                tokens.
            seed: an int, for a random sampler: the same seed gives the same
                tokens. None (the default) draws a fresh seed on every call
                (from numpy's global generator, so
                `keras.utils.set_random_seed` makes a whole run repeatable),
                as Keras' samplers do with `seed=None`. The seed is an input
                of the compiled loop, so a new seed compiles nothing.
            start_token_id: when given, every row's first generated token is
                this id (for `"unilm"` the first target token, segment 1,
                as bert4keras's `start_id`); it counts as a generated token
                (in `max_new_tokens`, `min_new_tokens` and the output) and
                never ends a row.

        Returns:
            int32 numpy array `(batch, max_new_tokens)` of new tokens; a row
            that ended holds `end_token_id` and then the model's pad id.

        Raises:
            TypeError: text instead of token ids.
            ValueError: an empty prompt, a prompt plus `max_new_tokens`
                longer than the position table, an id outside the
                vocabulary, `end_token_id` or `start_token_id` outside it,
                `max_new_tokens` not an integer >= 1 (a bool is refused),
                `min_new_tokens` outside `[0, max_new_tokens]`, sequences
                (the longest prompt plus `max_new_tokens`) longer than the
                int32 positions of decoding hold, or whose token buffer
                and key/value cache would take more than the machine's
                memory (the message gives the sizes), a `seed` that is not
                an int32, a prompt that is not a flat sequence of ids (the
                message names the row), ragged rows in an array, a
                `padding_mask` or `segment_ids` of another shape than
                `token_ids`, `segment_ids` other than the layout above (the
                message names the row), a `BeamSearch` with more beams than
                the vocabulary has tokens.
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

        The search (`keras_attn.samplers.BeamSearch.run_loop`) runs on
        device for the whole batch at once, cached and compiled like
        `generate`'s sampling loop: the batch is flattened to `batch *
        num_beams` rows (the prompt is encoded once per prompt and its cache
        copied to the beams), and each step reorders the rows' caches with
        `DecodingCache.select_rows`.

        Both algorithms score a beam by the sum of the float32
        `log_softmax` of the logits at the tokens it generated (the end
        token included; a forced `start_token_id` adds 0); at the first
        generated step only beam 0 of a row is live, so beams never
        duplicate; `end_token_id` is at -inf before `min_new_tokens`
        generated tokens; ties go to the lowest flat index `beam *
        vocab_size + token`; a row whose prompt is longer than the shortest
        one reads its prompt while other rows decode (its beams take the
        prompt token, scores unchanged).

        `early_stopping` False (the default), True or `"never"`:
        transformers' beam search, step for step (its `_beam_search`, with
        its -1e9 for absent beams): each step takes the `2 * num_beams`
        best continuations of the live beams; those of the first
        `num_beams` that end (the end token, or the `max_new_tokens`-th
        token) join the row's `num_beams` finished hypotheses, ranked by
        `score / length ** length_penalty` (length: the generated tokens);
        the best `num_beams` that do not end stay live. A row stops taking
        hypotheses when it has `num_beams` of them (`True`), or when its
        best live beam scored at its current length (`False`) or, with
        `length_penalty > 0`, at `max_new_tokens` (`"never"`) cannot beat
        its worst finished hypothesis. The hypotheses are returned best
        first with these normalised scores.

        `early_stopping="all_finished"` (this library's earlier search,
        `AutoRegressiveDecoder`'s): finished beams stay among the
        `num_beams` beams, each proposing exactly one candidate, itself
        extended by the pad id, score unchanged; the `num_beams` best of
        the row's `num_beams * vocab_size` candidates become the new beams;
        the loop stops when every beam of every row has finished; the beams
        are returned in the order of `score / length ** length_penalty`,
        descending, ties to the lower beam index. bert4keras's
        `AutoRegressiveDecoder.beam_search` returns as soon as its
        best-scoring beam ends, while this search continues until every
        beam has ended (the best sequence can differ when `length_penalty
        != 0` or a later beam overtakes).

        Args:
            prompts, max_new_tokens, end_token_id, min_new_tokens: as for
                `generate`.
            start_token_id: as for `generate`.
            num_beams: an integer >= 1; 1 is greedy decoding.
            length_penalty: a finite number, the exponent of the length in
                the ranking.
            early_stopping: False, True, `"never"` (transformers' modes)
                or `"all_finished"`; see above and `BeamSearch`.

        Returns:
            `(sequences, scores)`: int32 numpy `(batch, num_beams,
            max_new_tokens)`, best first (a finished beam is padded with the
            pad id), and float32 numpy `(batch, num_beams)`, the normalised
            scores in the same order.

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
                self._step.new_run()
            step = DecodingStep(
                forward, lengths, condition, encoded, self._step, target_starts, bucket
            )
            return sampler.run_loop(step, tokens, lengths, cache, settings, seed)

        return loop

    def _compiled_loop(self, key, make_loop):
        """The loop for `key`, compiled on first use (see `compile_loop`).

        A compiled program captures which variables the model has (LoRA
        adapters, quantized kernels), so when `model_state` changes (after
        `enable_lora`, `merge_lora`, `quantize`) every program is dropped
        and the next call compiles one for the model as it is now."""
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
    """The step a sampler's loop calls: `step(tokens, index, cache)` gives
    the float32 logits `(rows, vocab)` of the token after position `index`
    and the cache with the token at `index` written for rows past their
    prompt (the prompt encoding wrote the prompts; a row still reading its
    prompt re-reads it without writing). For a UniLM model a row's tokens
    are segment 1 from its `target_starts` on (a target prefix ending its
    prompt, then every generated token; from its prompt length when None).
    Given `pick=(function, args)` the step returns
    `function(logits, index, tokens, *args)` in place of the logits (a
    sampler's `next_tokens`: the new tokens and finished rows), computed in
    the same program.

    `run` is `decoding_step` or its compiled form (`CompiledStep`, torch),
    taking the same arguments. `prompt_width`: the prompt buffer's width,
    which a LongRoPE model's step at the original length encodes again
    whole (`recomputing_step`)."""

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
    LongRoPE model (see `DecodingStep`): the sequence's first
    `max(L + 1, width)` tokens (`width`: the prompt buffer's) encoded again
    in one pass, whose length past `L` selects the long factors for every
    position, their keys and values written over the cache's, and the
    logits at `L`; as transformers' Phi-3, which drops its cache when the
    sequence grows past `L`. Every row holds its prompt and generated tokens
    up to `L`; a row whose prompt is longer has it encoded whole (the prompt
    pass encoded only the first `L` positions when a shorter row generates
    before `L`); what this writes past a row's tokens is written again by
    the later steps that generate there. Later steps are ordinary ones,
    their length past `L`."""
    length = max(forward.recompute_length + 1, width)
    logits, cache = forward(tokens[:, :length], 0, cache, condition=condition, source=source)
    logits = ops.cast(logits[:, forward.recompute_length], "float32")
    return decoding_loop.picked(pick, logits, index, tokens), cache


def decoding_seed(seed, sampler):
    """The int32 `(2,)` seed of a sampler's loop, `[seed, 0]` (step `t`
    draws with `[seed, t]`): for `seed=None` a seed drawn now from numpy's
    global generator, for a sampler that draws (`needs_seed`); a
    deterministic one draws nothing, leaving numpy's state alone."""
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
    """`program` whose first call, the one that compiles it (XLA, or
    `torch.compile` of its step), says so when it is slow (see
    `keras_attn.progress.announced_if_slow`): a new user's first `generate`
    on torch compiles for tens of seconds."""
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
    identity of every variable (`enable_lora` adds variables, `merge_lora`
    removes them, `quantize` replaces kernels by integer ones and scales).
    Values are read at run time, so training needs no new program.

    The variables themselves, not their `id`s: holding them keeps a dropped
    variable's id from being handed to a new one, which would make two
    different states compare equal."""
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
