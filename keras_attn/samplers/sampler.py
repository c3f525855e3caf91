"""The base class of token samplers: logits in, one token id per row out."""

import math

import keras
import numpy as np
from keras import ops

from keras_attn.samplers import decoding_loop
from keras_attn.samplers.stateless_random import gumbel_noise


@keras.saving.register_keras_serializable(package="keras_attn")
class Sampler:
    """Picks the next token of each row from its logits.

    `sampler(logits, seed)` casts `logits` `(batch, vocab)` to float32,
    divides by `temperature`, lets `filter_logits` set every excluded token to
    `-inf`, and returns int32 ids `(batch,)`. On every backend, eager or
    compiled: a `-inf` token is never returned while its row has a finite
    logit (a row with none returns id 0), and the result is a pure function of
    `logits` and `seed`, the same on TensorFlow, JAX and torch.

    Random samplers (`needs_seed = True`) draw by the Gumbel-max trick,
    `argmax(logits + g)` with standard Gumbel noise `g`, which picks token `i`
    with probability `softmax(logits)_i`; the noise is bounded (23-bit
    uniforms), so a token more than about 19.4 below its row's maximum is
    never drawn. Ties go to the lowest id. Subclasses override
    `filter_logits` (and `get_config`); `needs_seed = False` returns the
    argmax of the filtered logits. A sampler owns the decoding loop
    (`run_loop`).

    Args:
        temperature: a finite number > 0 that divides the logits before
            filtering and sampling.

    Call arguments:
        logits: float tensor `(batch, vocab)`.
        seed: a stateless seed, int32 `(2,)`; change it every step. Ignored,
            and may be None, when `needs_seed` is False.
    """

    needs_seed = True

    def __init__(self, temperature=1.0):
        self.temperature = check_number(
            "temperature", temperature, type(self).__name__, minimum=0.0
        )

    def __call__(self, logits, seed=None):
        logits = ops.cast(logits, "float32")
        if len(logits.shape) != 2:
            raise ValueError(
                f"{type(self).__name__}: `logits` must have shape (batch, vocab); "
                f"received shape {tuple(logits.shape)}."
            )
        if self.temperature != 1.0:
            logits = ops.divide(logits, self.temperature)
        logits = self.filter_logits(logits)
        if not self.needs_seed:
            return lowest_argmax(logits)
        seed = self._check_seed(seed)
        # Shifting by the row maximum keeps the noise at full float32
        # resolution for large logits; a row without a finite logit is not
        # shifted (-inf - -inf would be NaN).
        row_max = ops.amax(logits, axis=-1, keepdims=True)
        logits = ops.subtract(logits, ops.where(ops.isfinite(row_max), row_max, 0.0))
        return lowest_argmax(ops.add(logits, gumbel_noise(ops.shape(logits), seed)))

    def run_loop(self, step, tokens, lengths, cache, settings, seed):
        """Decodes every row token by token, picking each with this sampler.

        Args:
            step: `step(tokens, index, cache, pick=None) -> (logits, cache)`:
                float32 logits `(rows, vocab)` for the token after position
                `index`; given `pick=(function, args)`, it returns
                `function(logits, index, tokens, *args)` in place of the
                logits (`decoding_loop.picked`), in the same program.
            tokens: int32 `(rows, total)`, the prompts then the pad id.
            lengths: int32 `(rows,)`, each prompt's length.
            cache: the decoding cache after the prompts.
            settings: a `decoding_loop.DecodingSettings`.
            seed: int32 `(2,)`; step `t` draws with `seed + [0, t]`.

        Returns:
            int32 `(rows, total)`: the prompts and their continuations (the
            pad id after a row's end).
        """
        limits = lengths + settings.max_new_tokens  # each row's final length
        done = ops.zeros((tokens.shape[0],), "bool")

        def body(index, tokens, cache, done):
            # The step picks the token in its own program: on torch its
            # compiled graph (one CUDA graph on a GPU) holds the whole step.
            (tokens, done), cache = step(
                tokens, index, cache,
                pick=(self.next_tokens, (lengths, limits, seed, done, settings)),
            )
            return index + 1, tokens, cache, done

        # Without an end token no row is done before the last step; with
        # one, a step after every row is done writes the pad id over the
        # pad id: `done` may be read a step late.
        done_check = "late" if settings.end_token_id is not None else None
        return decoding_loop.run_steps(body, lengths, limits, (tokens, cache, done), done_check)[0]

    def next_tokens(self, logits, index, tokens, lengths, limits, seed, done, settings):
        """One step of `run_loop` after the model: `tokens` `(rows, total)` with
        each row's token at `index + 1` written (picked from float32 `logits`,
        or forced: the prompt's, the start token; the pad id once done), and the
        rows done after it. A step after every row is done writes the pad id
        over the pad id."""
        following = index + 1
        logits = decoding_loop.forbid_early_end(logits, following - lengths, settings)
        step_seed = seed + ops.stack([0, following])
        chosen = ops.cast(self(logits, step_seed if self.needs_seed else None), "int32")
        forced, forced_token = decoding_loop.forced_tokens(tokens, following, lengths, settings)
        chosen = ops.where(forced, forced_token, chosen)
        chosen = ops.where(done, settings.pad_token_id, chosen)
        tokens = decoding_loop.write_column(tokens, following, chosen)
        finished = decoding_loop.finishes(chosen, forced, following, lengths, limits, settings)
        return tokens, ops.logical_or(done, finished)

    def filter_logits(self, logits):
        """Returns float32 `logits` `(batch, vocab)` (already divided by the
        temperature) with every token the sampler excludes set to `-inf`."""
        return logits

    def _check_seed(self, seed):
        if seed is None:
            raise ValueError(
                f"{type(self).__name__} draws at random and needs `seed`: an int32 "
                "tensor of shape (2,), changed every step; received seed=None."
            )
        seed = ops.cast(ops.convert_to_tensor(seed), "int32")
        if tuple(seed.shape) != (2,):
            raise ValueError(
                f"{type(self).__name__}: `seed` must be an int32 tensor of shape (2,); "
                f"received shape {tuple(seed.shape)}."
            )
        return seed

    def get_config(self):
        return {"temperature": self.temperature}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.get_config().items())
        return f"{type(self).__name__}({arguments})"


def lowest_argmax(scores):
    """The int32 index of each row's maximum, the lowest index among ties
    (`ops.argmax` leaves ties unspecified on TensorFlow)."""
    vocab = ops.shape(scores)[-1]
    is_max = ops.equal(scores, ops.amax(scores, axis=-1, keepdims=True))
    ids = ops.arange(vocab, dtype="int32")
    return ops.cast(ops.amin(ops.where(is_max, ids, vocab), axis=-1), "int32")


def check_number(name, value, owner, minimum, maximum=None, integer=False):
    """`value` as an int (`integer=True`, at least `minimum`) or a finite
    float (greater than `minimum`, at most `maximum`), or a ValueError that
    names `owner`, the argument and the value."""
    if integer:
        valid = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        valid = valid and value >= minimum
        expected = f"an integer >= {minimum}"
    else:
        valid = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
            value, bool
        )
        valid = valid and math.isfinite(value) and value > minimum
        valid = valid and (maximum is None or value <= maximum)
        expected = f"a finite number > {minimum}" + ("" if maximum is None else f" and <= {maximum}")
    if not valid:
        raise ValueError(f"{owner}: `{name}` must be {expected}; received {name}={value!r}.")
    return int(value) if integer else float(value)
