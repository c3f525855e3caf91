"""Each request's own way of choosing tokens, in a batch shared with others."""

import dataclasses
import math
from typing import NamedTuple
from typing import Optional
from typing import Tuple

import numpy as np


# The most alternatives `SamplingParams.logprobs` may ask for (OpenAI's).
MAX_LOGPROBS = 20


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """How one request of a `keras_attn.serving.Engine` chooses its tokens
    and when it stops; every request of a batch has its own.

    The next token is chosen from the float32 logits of the request's row
    in this order (transformers' order of its logits processors):

    1. `repetition_penalty`: the logit of every token already in the
       sequence (prompt and generated) is divided by it where positive and
       multiplied by it where negative (Keskar et al., 2019);
    2. `no_repeat_ngram_size = n`: a token that would complete an n-gram
       already in the sequence is forbidden;
    3. `min_new_tokens`: the end tokens are forbidden before it;
    4. `temperature = 0`: the first highest logit (greedy); otherwise the
       logits are divided by `temperature`, cut by `top_k` (the `k`
       highest), `top_p` (the smallest set of highest-probability tokens
       whose probabilities sum to at least `p`) and `min_p` (tokens below
       `min_p` times the highest probability), and a token is drawn from
       the softmax of what is left.

    A request with a `seed` draws its `t`-th token from a generator seeded
    with `(seed, t)`: its tokens depend on its prompt, its parameters and
    its seed alone, whatever else shares the batch. Without a seed it draws
    from the engine's generator.

    A request stops after `max_new_tokens` tokens, after generating one of
    `end_token_ids` (kept in its tokens), or when its text contains one of
    `stop` (the text is cut before it; the engine needs a tokenizer then).

    Args:
        max_new_tokens: an integer >= 1.
        temperature: a number >= 0; 0 is greedy.
        top_k: None or an integer >= 1.
        top_p: a number in (0, 1].
        min_p: a number in [0, 1].
        repetition_penalty: a number > 0; 1 changes nothing.
        no_repeat_ngram_size: an integer >= 0; 0 forbids nothing.
        min_new_tokens: an integer >= 0.
        end_token_ids: token ids that end the request; None takes the
            engine's default (its tokenizer's end id, or the model config's
            `eos_token_id`).
        stop: strings that end the request.
        seed: None or an integer in [0, 2**63).
        logprobs: None, or an integer in [0, MAX_LOGPROBS]: record each
            generated token's log-probability under the model (the
            log-softmax of its logits, before steps 1-4) and those of the
            `logprobs` most likely tokens (`Request.logprobs`).

    Raises:
        ValueError: a value outside its range, naming the field and value.
    """

    max_new_tokens: int = 16
    temperature: float = 0.0
    top_k: Optional[int] = None
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    min_new_tokens: int = 0
    end_token_ids: Optional[Tuple[int, ...]] = None
    stop: Tuple[str, ...] = ()
    seed: Optional[int] = None
    logprobs: Optional[int] = None

    def __post_init__(self):
        _integer(self, "max_new_tokens", 1)
        _number(self, "temperature", 0.0, math.inf, closed_high=False)
        if self.top_k is not None:
            _integer(self, "top_k", 1)
        _number(self, "top_p", 0.0, 1.0, closed_low=False)
        _number(self, "min_p", 0.0, 1.0)
        _number(self, "repetition_penalty", 0.0, math.inf, closed_low=False, closed_high=False)
        _integer(self, "no_repeat_ngram_size", 0)
        _integer(self, "min_new_tokens", 0)
        if self.end_token_ids is not None:
            ids = (self.end_token_ids,) if _is_int(self.end_token_ids) else self.end_token_ids
            if not isinstance(ids, (list, tuple)) or not all(_is_int(i) and i >= 0 for i in ids):
                raise ValueError(
                    "`end_token_ids` must be None, a token id or a list of token ids >= 0; "
                    f"received end_token_ids={self.end_token_ids!r}."
                )
            object.__setattr__(self, "end_token_ids", tuple(int(i) for i in ids))
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
            raise ValueError(
                f"`stop` must be a string or a list of non-empty strings; received stop={self.stop!r}."
            )
        object.__setattr__(self, "stop", tuple(stop))
        if self.logprobs is not None and not (
            _is_int(self.logprobs) and 0 <= self.logprobs <= MAX_LOGPROBS
        ):
            raise ValueError(
                f"`logprobs` must be None or an integer in [0, {MAX_LOGPROBS}]; received "
                f"logprobs={self.logprobs!r}."
            )
        if self.seed is not None and not (_is_int(self.seed) and 0 <= self.seed < 2**63):
            raise ValueError(
                f"`seed` must be None or an integer in [0, 2**63); received seed={self.seed!r}."
            )

    @property
    def greedy(self):
        return self.temperature == 0


class TokenLogprob(NamedTuple):
    """A generated token's log-probability under the model and the most
    likely tokens' (`SamplingParams.logprobs`).

    Attributes:
        token: the token id.
        logprob: its log-probability, a float.
        top: `((token id, log-probability), ...)`, the `logprobs` most
            likely tokens, most likely first.
    """

    token: int
    logprob: float
    top: tuple


def token_logprob(logits, token, count):
    """The `TokenLogprob` of `token` under the float `(vocab,)` logits:
    their log-softmax, in float64."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())
    top = np.argsort(-logprobs, kind="stable")[:count]
    return TokenLogprob(
        int(token), float(logprobs[token]), tuple((int(t), float(logprobs[t])) for t in top)
    )


def choose_token(logits, params, sequence, generated, end_token_ids, rng):
    """The next token of one request.

    Args:
        logits: float32 numpy `(vocab,)`, the request's row.
        params: its `SamplingParams`.
        sequence: int numpy, its prompt and generated tokens so far.
        generated: how many tokens it has generated (the draw's index).
        end_token_ids: the ids that end it (forbidden before
            `min_new_tokens`).
        rng: the engine's numpy generator, for a request without a seed.

    Returns:
        The token id, an int.
    """
    logits = processed_logits(logits, params, sequence, generated, end_token_ids)
    if params.greedy:
        return int(np.argmax(logits))
    probabilities = sampling_probabilities(logits, params)
    if not probabilities.sum() > 0:
        return int(np.argmax(logits))
    generator = rng if params.seed is None else np.random.default_rng([params.seed, generated])
    return int(generator.choice(probabilities.shape[0], p=probabilities / probabilities.sum()))


def processed_logits(logits, params, sequence, generated, end_token_ids):
    """Steps 1-3 of `SamplingParams`: the logits after the repetition
    penalty, the n-gram ban and `min_new_tokens`."""
    logits = np.array(logits, dtype=np.float32)
    if params.repetition_penalty != 1.0 and len(sequence):
        seen = np.unique(np.asarray(sequence, dtype=np.int64))
        seen = seen[(seen >= 0) & (seen < logits.shape[0])]
        values = logits[seen]
        logits[seen] = np.where(
            values > 0, values / params.repetition_penalty, values * params.repetition_penalty
        )
    if params.no_repeat_ngram_size:
        for token in banned_ngram_tokens(sequence, params.no_repeat_ngram_size):
            if 0 <= token < logits.shape[0]:
                logits[token] = -np.inf
    if generated < params.min_new_tokens:
        for token in end_token_ids:
            if 0 <= token < logits.shape[0]:
                logits[token] = -np.inf
    return logits


def sampling_probabilities(logits, params):
    """Step 4 of `SamplingParams` for `temperature > 0`: the probabilities
    a token is drawn with (unnormalised: zero for a cut token)."""
    logits = logits / np.float32(params.temperature)
    if params.top_k is not None and params.top_k < logits.shape[0]:
        threshold = np.partition(logits, -params.top_k)[-params.top_k]
        logits = np.where(logits < threshold, -np.inf, logits)
    probabilities = _softmax(logits)
    if params.top_p < 1.0:
        order = np.argsort(-probabilities, kind="stable")
        cumulative = np.cumsum(probabilities[order])
        # Keep each token whose higher-probability tokens sum below `p`.
        drop = order[np.concatenate([[False], cumulative[:-1] >= params.top_p])]
        probabilities[drop] = 0.0
    if params.min_p > 0.0:
        probabilities[probabilities < params.min_p * probabilities.max()] = 0.0
    return probabilities


def banned_ngram_tokens(sequence, size):
    """The tokens that would complete an n-gram (`n = size`) that
    `sequence` already holds, following its last `size - 1` tokens."""
    sequence = [int(t) for t in sequence]
    if len(sequence) < size:
        return []
    prefix = tuple(sequence[len(sequence) - size + 1:]) if size > 1 else ()
    banned = []
    for start in range(len(sequence) - size + 1):
        if tuple(sequence[start:start + size - 1]) == prefix:
            banned.append(sequence[start + size - 1])
    return banned


def _softmax(logits):
    finite = np.isfinite(logits)
    if not finite.any():
        return np.zeros_like(logits)
    shifted = np.where(finite, logits - logits[finite].max(), -np.inf)
    weights = np.exp(shifted)
    return weights / weights.sum()


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _integer(params, name, low):
    value = getattr(params, name)
    if not _is_int(value) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}; received {name}={value!r}.")


def _number(params, name, low, high, closed_low=True, closed_high=True):
    value = getattr(params, name)
    inside = (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= low if closed_low else value > low)
        and (value <= high if closed_high else value < high)
    )
    if not inside:
        interval = f"{'[' if closed_low else '('}{low}, {high}{']' if closed_high else ')'}"
        raise ValueError(f"`{name}` must be a number in {interval}; received {name}={value!r}.")
