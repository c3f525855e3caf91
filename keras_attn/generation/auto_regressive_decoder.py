"""A bert4keras-style decoder over the cached, compiled `Generator`."""

import keras
import numpy as np

from keras_attn.generation.generator import Generator
from keras_attn.generation.generator import decoding_seed
from keras_attn.generation.prompts import check_token_id
from keras_attn.generation.prompts import target_start
from keras_attn.generation.shared_output import shared_output_decode
from keras_attn.samplers import BeamSearch
from keras_attn.samplers import RandomSampler
from keras_attn.samplers import TopKSampler
from keras_attn.samplers import TopPSampler
from keras_attn.samplers.decoding_loop import DecodingSettings
from keras_attn.samplers.sampler import check_number


class AutoRegressiveDecoder:
    """Beam search and random sampling with bert4keras's
    `AutoRegressiveDecoder` interface, for porting its subclasses.

    No `predict` is needed: `model` (`application="lm"` or `"unilm"`, or an
    encoder-decoder such as T5, whose `inputs` are the source) is decoded by
    `keras_attn.generation.Generator`, with a key/value cache and one
    compiled loop. For a `"unilm"` model the input is the source (segment 0)
    and the output the target (segment 1); `[token_ids, segment_ids]` may end
    the input with the target's start (1s after the 0s), which the output
    continues. As in bert4keras, output ids exclude the input, start with
    `start_id` when set and end with `end_id` when generated; `maxlen` counts
    the ids after `start_id`, `minlen` the output ids including `start_id`
    and `end_id`. A `conditional_layer_norm` model decodes one example with
    its 1-D condition: `[token_ids, condition]`, `[token_ids, segment_ids,
    condition]` or `{"token_ids": ..., "condition": ...}`; empty `token_ids`
    start from `start_id` alone.

    With `combine` (bert4keras's `use_states=True`), `inputs` is a list of
    1-D prompts sharing one output, each at its own positions; every step
    calls `combined, states = combine(probabilities, states)` on the float32
    softmax `(prompts, rows, vocab)` and decodes with the returned `(rows,
    vocab)` probabilities. `states` is a nest of arrays of fixed shapes,
    carried from step to step (not reordered with the beams). `combine` runs
    inside the compiled loop, so it uses `keras.ops`. Not for
    encoder-decoders or `condition` models.

    Differences from bert4keras: `end_id` is not generated before `minlen`;
    `beam_search` returns the best beam once every beam has ended;
    `random_sample` returns its samples in draw order. The porting table is
    in docs/generation.md.

    Args:
        model: a `TransformerModel` with `application="lm"` or `"unilm"`.
        start_id: None, or the id every output starts with.
        end_id: None, or the id that ends an output.
        maxlen: an integer >= 1, the most ids generated after `start_id`.
        minlen: an integer >= 1, the fewest output ids (`start_id` and
            `end_id` included) before `end_id` may be generated.
        combine: None, or `combine(probabilities, states) ->
            (probabilities, states)`: several prompts then share one output.

    Example:

    ```python
    decoder = keras_attn.AutoRegressiveDecoder(
        model, start_id=None, end_id=tokenizer.sep_id, maxlen=32
    )
    token_ids, segment_ids = tokenizer.encode(text)
    title_ids = decoder.beam_search([token_ids, segment_ids], topk=3)
    ```
    """

    def __init__(self, model, start_id=None, end_id=None, maxlen=None, minlen=1, combine=None):
        name = type(self).__name__
        self.generator = getattr(model, "generator", None) or Generator(model)
        forward = self.generator.forward
        check_token_id("start_id", start_id, forward.vocab_size, name)
        check_token_id("end_id", end_id, forward.vocab_size, name)
        # An encoder-decoder (T5) starts its decoder with its own start id:
        # bert4keras's `start_id=0` for mT5 is that id, output first as in
        # bert4keras, not a token to generate after it.
        self.decoder_start = forward.seq2seq and start_id == forward.start_token_id
        if self.decoder_start:
            start_id = None
        self.start_id = start_id
        self.end_id = end_id
        self.maxlen = check_number("maxlen", maxlen, name, minimum=1, integer=True)
        self.minlen = check_number("minlen", minlen, name, minimum=1, integer=True)
        self.max_new_tokens = self.maxlen + (start_id is not None)
        self.min_new_tokens = 0 if end_id is None else self.minlen - 1
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"{name}: `minlen={minlen}` exceeds the {self.max_new_tokens} ids an "
                f"output can have (maxlen={maxlen}"
                + (" plus start_id" if start_id is not None else "")
                + ")."
            )
        if combine is not None:
            if not callable(combine):
                raise ValueError(
                    f"{name}: `combine` must be None or a callable "
                    f"`combine(probabilities, states) -> (probabilities, states)`; received "
                    f"{combine!r}."
                )
            if forward.seq2seq or forward.conditional:
                raise ValueError(
                    f"{name}: `combine` decodes several prompts of a decoder-only model "
                    f"(application='lm' or 'unilm') without a condition; {model.name} "
                    + ("is an encoder-decoder." if forward.seq2seq
                       else "takes a `condition` (conditional_layer_norm).")
                )
        self.combine = combine

    def beam_search(self, inputs, topk, min_ends=1, return_all=False, states=None):
        """Beam search with `topk` beams.

        Args:
            inputs: one example: `[token_ids]` or `[token_ids, segment_ids]`
                (1-D), with a `condition` for a `conditional_layer_norm` model
                (see the class); with `combine`, a list of 1-D prompts.
            topk: the number of beams, an integer >= 1.
            min_ends: must be 1 (the output ends at its first `end_id`).
            return_all: whether to return every beam.
            states: with `combine`, its initial states; without, must be None.

        Returns:
            The best output ids, a 1-D int32 numpy array; with `return_all`,
            `(outputs, scores)`: the `topk` outputs best first (a list of 1-D
            arrays) and their float32 summed log-probabilities `(topk,)`.
        """
        if min_ends != 1:
            raise ValueError(
                f"{type(self).__name__}.beam_search supports only min_ends=1 (stop at the "
                f"first end_id); received min_ends={min_ends!r}."
            )
        topk = check_number("topk", topk, f"{type(self).__name__}.beam_search", minimum=1,
                            integer=True)
        if self.combine is not None:
            vocab_size = self.generator.forward.vocab_size
            if topk > vocab_size:
                raise ValueError(
                    f"{type(self).__name__}.beam_search: topk={topk} beams need distinct first "
                    f"tokens, but the vocabulary has {vocab_size} (vocab_size={vocab_size})."
                )
            search = BeamSearch(topk, early_stopping="all_finished")
            tokens, scores, _ = (
                keras.ops.convert_to_numpy(x)
                for x in self._shared_output(inputs, search, 1, states, np.zeros((2,), "int32"))
            )
            # Scores are summed log-probabilities: beam search's ranking with
            # length_penalty=0, best first, ties to the lower beam.
            order = np.argsort(-scores[0], kind="stable")
            outputs = [self._trim(tokens[k, 1:]) for k in order]
            scores = scores[0][order].astype("float32")
        else:
            self._no_states(states)
            prompt, segment_ids, condition, empty = self._example(inputs)
            sequences, scores = self.generator.beam_search(
                self._prompts(prompt, segment_ids, condition, 1), self.max_new_tokens - empty, topk,
                end_token_id=self.end_id, min_new_tokens=max(0, self.min_new_tokens - empty),
                start_token_id=None if empty else self.start_id,
                early_stopping="all_finished",
            )
            outputs = [self._trim(sequence, empty) for sequence in sequences[0]]
            scores = scores[0]
        if return_all:
            return outputs, scores
        return outputs[0]

    def random_sample(self, inputs, n, topk=None, topp=None, temperature=1.0, seed=None,
                      states=None):
        """`n` outputs sampled independently, from the `topk` most probable ids
        (if set), then the nucleus of mass `topp` (if set), of the logits divided
        by `temperature` (see `keras_attn.samplers.TopPSampler`).

        Args:
            inputs: one example, as for `beam_search`.
            n: the number of samples, an integer >= 1.
            topk, topp, temperature: as bert4keras's.
            seed: an int (the same seed, the same samples); None draws one from
                numpy's global generator on every call.
            states: as for `beam_search`.

        Returns:
            A list of `n` 1-D int32 numpy arrays.
        """
        n = check_number("n", n, f"{type(self).__name__}.random_sample", minimum=1, integer=True)
        if topp is not None:
            sampler = TopPSampler(p=topp, k=topk, temperature=temperature)
        elif topk is not None:
            sampler = TopKSampler(k=topk, temperature=temperature)
        else:
            sampler = RandomSampler(temperature=temperature)
        if self.combine is not None:
            tokens = self._shared_output(inputs, sampler, n, states, decoding_seed(seed, sampler))
            return [self._trim(row[1:]) for row in keras.ops.convert_to_numpy(tokens)]
        self._no_states(states)
        prompt, segment_ids, condition, empty = self._example(inputs)
        sequences = self.generator.generate(
            self._prompts(prompt, segment_ids, condition, n), self.max_new_tokens - empty,
            sampler=sampler,
            end_token_id=self.end_id, min_new_tokens=max(0, self.min_new_tokens - empty), seed=seed,
            start_token_id=None if empty else self.start_id,
        )
        return [self._trim(sequence, empty) for sequence in sequences]

    def _shared_output(self, inputs, decoder_loop, rows, states, seed):
        """`decoder_loop.run_loop`'s result over the output that the prompts
        `inputs` share, their probabilities combined by `combine`."""
        name = type(self).__name__
        if not isinstance(inputs, (list, tuple)) or not inputs:
            raise ValueError(
                f"{name} with `combine`: `inputs` must be a non-empty list of prompts (each "
                f"1-D token ids) that share one output; received {inputs!r}."
            )
        prompts = []
        for index, prompt in enumerate(inputs):
            array = np.asarray(prompt)
            if array.ndim != 1 or len(array) == 0:
                raise ValueError(
                    f"{name} with `combine`: prompt {index} must be 1-D token ids, not "
                    f"empty; received shape {array.shape}."
                )
            prompts.append(array)
        settings = DecodingSettings(
            self.max_new_tokens, self.generator.forward.pad_token_id, self.end_id,
            self.min_new_tokens, self.start_id,
        )
        return shared_output_decode(
            self.generator, decoder_loop, prompts, rows, settings, self.combine, states, seed
        )

    def _no_states(self, states):
        if states is not None:
            raise ValueError(
                f"{type(self).__name__}: `states` is the state of a `combine` hook, and this "
                f"decoder has none (the key/value cache is the decoding state); received "
                f"states={states!r}."
            )

    def _prompts(self, prompt, segment_ids, condition, count):
        """`count` copies of the prompt, as `Generator` takes them."""
        if segment_ids is None and condition is None:
            return [prompt] * count
        prompts = {"token_ids": np.tile(prompt, (count, 1))}
        if segment_ids is not None:
            prompts["segment_ids"] = np.tile(segment_ids, (count, 1))
        if condition is not None:
            prompts["condition"] = np.tile(condition, (count, 1))
        return prompts

    def _example(self, inputs):
        """`(token_ids, segment_ids, condition, empty)` of the one example
        `inputs` (`segment_ids` None without a target prefix, `condition` None
        without conditional LayerNorms, `empty` 1 when `token_ids` was empty).
        Raises a ValueError for anything else."""
        name = type(self).__name__
        conditional = self.generator.forward.conditional
        if conditional:
            example = (
                "one example: [token_ids, condition], [token_ids, segment_ids, condition] "
                "or {'token_ids': ..., 'condition': ...}"
            )
        else:
            example = "one example as a list: [token_ids] or [token_ids, segment_ids]"
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - {"token_ids", "segment_ids", "condition"})
            if unknown or "token_ids" not in inputs:
                raise ValueError(
                    f"{name}: a dict example takes 'token_ids' and optionally 'segment_ids' "
                    f"and 'condition'; received the keys {sorted(inputs)}."
                )
            names = [k for k in ("token_ids", "segment_ids", "condition") if k in inputs]
            values = [inputs[k] for k in names]
        else:
            counts = (2, 3) if conditional else (1, 2)
            if not isinstance(inputs, (list, tuple)) or len(inputs) not in counts:
                raise ValueError(f"{name}: `inputs` must be {example}; received {inputs!r}.")
            if np.isscalar(inputs[0]):
                raise ValueError(
                    f"{name}: `inputs` must be {example}; received a list of ids: wrap it "
                    "as [token_ids]."
                )
            names = ["token_ids", "segment_ids", "condition"][: len(inputs)]
            if conditional:
                names[-1] = "condition"
            values = list(inputs)
        arrays = dict(zip(names, (np.asarray(x) for x in values)))
        if conditional != ("condition" in arrays):
            raise ValueError(
                f"{name}: {self.generator.model.name} "
                + ("was built with conditional_layer_norm: `inputs` must be " + example
                   if conditional else "takes no `condition` (no conditional LayerNorms)")
                + "."
            )
        for input_name in ("token_ids", "segment_ids", "condition"):
            if input_name in arrays and arrays[input_name].ndim != 1:
                what = "vector" if input_name == "condition" else "ids"
                raise ValueError(
                    f"{name}: `{input_name}` must be one example's {what}, 1-D; received shape "
                    f"{arrays[input_name].shape} (decode a batch with Generator or "
                    "TransformerModel.generate)."
                )
        token_ids = arrays["token_ids"]
        segment_ids = arrays.get("segment_ids")
        if segment_ids is not None:
            if segment_ids.shape != token_ids.shape:
                raise ValueError(
                    f"{name}: `segment_ids` must have the length of token_ids "
                    f"({len(token_ids)}), one per token; received {segment_ids.tolist()}."
                )
            if target_start(self.generator.forward, segment_ids, owner=name) == len(token_ids):
                segment_ids = None  # the whole input is the source
        empty = 0
        if len(token_ids) == 0:
            if self.start_id is None or self.generator.forward.application != "lm":
                raise ValueError(
                    f"{name}: empty `token_ids` need `start_id` and an application='lm' "
                    "model (the output then starts from start_id alone); give at least "
                    "one token otherwise."
                )
            token_ids, empty = np.array([self.start_id]), 1
        return token_ids, segment_ids, arrays.get("condition"), empty

    def _trim(self, sequence, empty=0):
        """`sequence` up to and including its first `end_id` (after the
        decoder's start id, for an encoder-decoder given it as `start_id`,
        or after `start_id` when it was the whole prompt)."""
        if self.end_id is not None:
            ends = np.flatnonzero(sequence == self.end_id)
            if len(ends):
                sequence = sequence[: ends[0] + 1]
        if self.decoder_start:
            sequence = np.concatenate([[self.generator.forward.start_token_id], sequence])
        if empty:
            sequence = np.concatenate([[self.start_id], sequence])
        return np.asarray(sequence).astype("int32")
