"""A bert4keras-style decoder over the cached, compiled `Generator`."""

import numpy as np

from keras_attn.generation.generator import Generator
from keras_attn.samplers import RandomSampler
from keras_attn.samplers import TopKSampler
from keras_attn.samplers import TopPSampler
from keras_attn.samplers.sampler import check_number


class AutoRegressiveDecoder:
    """Beam search and random sampling with bert4keras's
    `AutoRegressiveDecoder` interface, for porting its subclasses.

    bert4keras's decoder calls a user-written `predict` on the whole
    sequence at every step; this one needs no `predict`: it decodes
    `model` (a builder model with `application="lm"` or `"unilm"`, or an
    encoder-decoder such as T5, whose `inputs` are the source) with
    `keras_attn.generation.Generator`, which keeps a key/value cache and
    runs the whole loop as one compiled program. For a `"unilm"` model the
    input is the source (segment 0) and the output the target (segment 1),
    as in bert4keras's seq2seq examples.

    As in bert4keras, output ids exclude the input, start with `start_id`
    when it is set, and end with `end_id` when it was generated; `maxlen`
    counts the tokens after `start_id`, `minlen` the output ids including
    `start_id` and `end_id`.

    | bert4keras                                  | keras_attn                                           |
    | ------------------------------------------- | ---------------------------------------------------- |
    | subclass, `@wraps` and `predict`            | not needed: `AutoRegressiveDecoder(model, ...)`       |
    | `start_id`, `end_id`                        | `start_id`, `end_id` (`start_token_id`, `end_token_id`) |
    | `maxlen`                                    | `maxlen` (`max_new_tokens = maxlen + (start_id set)`) |
    | `minlen`                                    | `minlen` (`min_new_tokens = minlen - 1`)              |
    | `beam_search(inputs, topk)`                 | `beam_search(inputs, topk)` (`Generator.beam_search`) |
    | `beam_search(..., min_ends=1)`              | `min_ends=1` only                                     |
    | `beam_search(..., temperature)`             | not supported (scores are log-probabilities)         |
    | `random_sample(inputs, n, topk, topp)`      | `random_sample(inputs, n, topk, topp, temperature, seed)` |
    | `np.random` global state                    | `seed` (None: drawn from `np.random`)                 |
    | `states`                                    | not needed: the cache is the state                    |

    Differences: `end_id` cannot be generated before `minlen` output ids
    (bert4keras generates it there without ending the sequence);
    `beam_search` keeps finished beams among the `topk` beams and returns
    the best once every beam has ended (bert4keras returns as soon as its
    best-scoring beam ends; see `Generator.beam_search`); `random_sample`
    returns its `n` samples in draw order, not in the order they ended.

    Args:
        model: a `TransformerModel` with `application="lm"` or `"unilm"`.
        start_id: None, or the id every output starts with.
        end_id: None, or the id that ends an output.
        maxlen: an integer >= 1, the most ids generated after `start_id`.
        minlen: an integer >= 1, the fewest output ids (`start_id` and
            `end_id` included) before `end_id` may be generated.

    Example:

    ```python
    decoder = keras_attn.AutoRegressiveDecoder(
        model, start_id=None, end_id=tokenizer.sep_id, maxlen=32
    )
    token_ids, segment_ids = tokenizer.encode(text)
    title_ids = decoder.beam_search([token_ids, segment_ids], topk=3)
    ```
    """

    def __init__(self, model, start_id=None, end_id=None, maxlen=None, minlen=1):
        name = type(self).__name__
        self.generator = getattr(model, "generator", None) or Generator(model)
        forward = self.generator.forward
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

    def beam_search(self, inputs, topk, min_ends=1, return_all=False):
        """Beam search with `topk` beams.

        Args:
            inputs: one example: `[token_ids]` or `[token_ids,
                segment_ids]` (1-D; segment ids all 0).
            topk: the number of beams, an integer >= 1.
            min_ends: must be 1 (the output ends at its first `end_id`).
            return_all: whether to return every beam.

        Returns:
            The best output ids, a 1-D int32 numpy array; with
            `return_all`, `(outputs, scores)`: the `topk` outputs best first
            (a list of 1-D arrays) and their float32 scores (summed
            log-probabilities), shape `(topk,)`.
        """
        if min_ends != 1:
            raise ValueError(
                f"{type(self).__name__}.beam_search supports only min_ends=1 (stop at the "
                f"first end_id); received min_ends={min_ends!r}."
            )
        sequences, scores = self.generator.beam_search(
            [self._prompt(inputs)], self.max_new_tokens, topk,
            end_token_id=self.end_id, min_new_tokens=self.min_new_tokens,
            start_token_id=self.start_id,
        )
        outputs = [self._trim(sequence) for sequence in sequences[0]]
        if return_all:
            return outputs, scores[0]
        return outputs[0]

    def random_sample(self, inputs, n, topk=None, topp=None, temperature=1.0, seed=None):
        """`n` outputs sampled independently, from the `topk` most probable
        ids (if set), then the nucleus of mass `topp` (if set), of the
        logits divided by `temperature` (see `keras_attn.samplers`).

        Args:
            inputs: one example, as for `beam_search`.
            n: the number of samples, an integer >= 1.
            topk, topp, temperature: as bert4keras's, see `TopPSampler`.
            seed: an int; the same seed gives the same samples. None draws
                a fresh one on every call from numpy's global generator (as
                bert4keras samples from it), as `Generator.generate` does.

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
        sequences = self.generator.generate(
            [self._prompt(inputs)] * n, self.max_new_tokens, sampler=sampler,
            end_token_id=self.end_id, min_new_tokens=self.min_new_tokens, seed=seed,
            start_token_id=self.start_id,
        )
        return [self._trim(sequence) for sequence in sequences]

    def _prompt(self, inputs):
        """The token ids of the one example `inputs`, or a ValueError."""
        name = type(self).__name__
        example = "one example as a list: [token_ids] or [token_ids, segment_ids]"
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (1, 2):
            raise ValueError(f"{name}: `inputs` must be {example}; received {inputs!r}.")
        if np.isscalar(inputs[0]):
            raise ValueError(
                f"{name}: `inputs` must be {example}; received a list of ids: wrap it "
                "as [token_ids]."
            )
        arrays = [np.asarray(x) for x in inputs]
        for input_name, array in zip(("token_ids", "segment_ids"), arrays):
            if array.ndim != 1:
                raise ValueError(
                    f"{name}: `{input_name}` must be one example's ids, 1-D; received "
                    f"shape {array.shape} (decode a batch with Generator or "
                    "TransformerModel.generate)."
                )
        if len(arrays) == 2:
            token_ids, segment_ids = arrays
            if segment_ids.shape != token_ids.shape or (segment_ids != 0).any():
                raise ValueError(
                    f"{name}: `segment_ids` must be all 0 with the length of token_ids "
                    f"({len(token_ids)}): the input is the source, segment 0, and the "
                    f"output is generated as segment 1; received {segment_ids.tolist()}."
                )
        return arrays[0]

    def _trim(self, sequence):
        """`sequence` up to and including its first `end_id` (after the
        decoder's start id, for an encoder-decoder given it as `start_id`)."""
        if self.end_id is not None:
            ends = np.flatnonzero(sequence == self.end_id)
            if len(ends):
                sequence = sequence[: ends[0] + 1]
        if self.decoder_start:
            sequence = np.concatenate([[self.generator.forward.start_token_id], sequence])
        return sequence.astype("int32")
