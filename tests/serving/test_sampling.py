"""Per-request sampling (`keras_attn.serving.SamplingParams`) against
transformers' logits processors, and streamed text (`TextStream`) against
decoding every token at once."""

import numpy as np
import pytest
import torch
from transformers import generation as hf

from keras_attn.serving import SamplingParams
from keras_attn.serving import TextStream
from keras_attn.serving.sampling import banned_ngram_tokens
from keras_attn.serving.sampling import choose_token
from keras_attn.serving.sampling import processed_logits
from keras_attn.serving.sampling import sampling_probabilities

VOCAB = 50


def transformers_scores(logits, sequence, params):
    processors = hf.LogitsProcessorList()
    if params.repetition_penalty != 1.0:
        processors.append(hf.RepetitionPenaltyLogitsProcessor(params.repetition_penalty))
    if params.no_repeat_ngram_size:
        processors.append(hf.NoRepeatNGramLogitsProcessor(params.no_repeat_ngram_size))
    processors.append(hf.TemperatureLogitsWarper(params.temperature))
    if params.top_k is not None:
        processors.append(hf.TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        processors.append(hf.TopPLogitsWarper(params.top_p))
    if params.min_p > 0.0:
        processors.append(hf.MinPLogitsWarper(params.min_p))
    ids = torch.tensor([sequence])
    return processors(ids, torch.tensor(logits[None]))[0].numpy()


@pytest.mark.parametrize("fields", [
    dict(temperature=0.7, top_k=9),
    dict(temperature=1.3, top_p=0.8),
    dict(temperature=1.0, min_p=0.2),
    dict(temperature=0.9, top_k=20, top_p=0.7, min_p=0.05, repetition_penalty=1.4),
    dict(temperature=1.0, repetition_penalty=0.7, no_repeat_ngram_size=2),
])
def test_the_distribution_is_transformers(fields):
    rng = np.random.default_rng(0)
    params = SamplingParams(**fields)
    for _ in range(5):
        logits = (rng.standard_normal(VOCAB) * 3).astype("float32")
        sequence = rng.integers(0, VOCAB, size=12).tolist()
        sequence[-3:] = sequence[2:5]  # an n-gram that repeats
        expected = transformers_scores(logits, sequence, params)
        ours = sampling_probabilities(processed_logits(logits, params, sequence, 3, ()), params)
        kept = np.isfinite(expected)
        np.testing.assert_array_equal(ours > 0, kept)
        reference = np.exp(expected[kept] - expected[kept].max())
        np.testing.assert_allclose(ours[kept] / ours.sum(), reference / reference.sum(),
                                   rtol=1e-5)


def test_banned_ngrams_by_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(50):
        sequence = rng.integers(0, 4, size=rng.integers(0, 12)).tolist()
        size = int(rng.integers(1, 4))
        expected = {
            token for token in range(4)
            if len(sequence) + 1 >= size and any(
                (sequence + [token])[-size:] == sequence[start:start + size]
                for start in range(len(sequence) - size + 1)
            )
        }
        assert set(banned_ngram_tokens(sequence, size)) == expected, (sequence, size)


def test_greedy_min_new_tokens_and_seeds():
    logits = np.arange(VOCAB, dtype="float32")
    greedy = SamplingParams(min_new_tokens=2)
    assert choose_token(logits, greedy, [], 0, (VOCAB - 1,), None) == VOCAB - 2
    assert choose_token(logits, greedy, [], 2, (VOCAB - 1,), None) == VOCAB - 1
    params = SamplingParams(temperature=5.0, seed=11)
    draws = [choose_token(logits, params, [], t, (), None) for t in range(20)]
    again = [choose_token(logits, params, [], t, (), np.random.default_rng(5)) for t in range(20)]
    assert draws == again and len(set(draws)) > 5


@pytest.mark.parametrize("field, value", [
    ("max_new_tokens", 0), ("temperature", -1.0), ("temperature", float("nan")),
    ("top_k", 0), ("top_p", 0.0), ("top_p", 1.5), ("min_p", 2.0),
    ("repetition_penalty", 0.0), ("no_repeat_ngram_size", -1), ("min_new_tokens", 1.5),
    ("end_token_ids", [-1]), ("stop", [""]), ("seed", -3),
])
def test_a_bad_value_names_its_field(field, value):
    with pytest.raises(ValueError, match=f"`{field}`.*{field}="):
        SamplingParams(**{field: value})


class Bytes:
    """A byte-level tokenizer: token `i` is the byte `i`, as byte-level
    BPE's pieces are byte strings."""

    def decode(self, ids):
        return bytes(ids).decode("utf-8", errors="replace")


class Pieces:
    """SentencePiece-like: a piece's leading "_" is a space, except at the
    start of the decoded text."""

    pieces = ["_the", "_caf", "é", "_is", "_open", "!"]

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids).replace("_", " ").lstrip(" ")


def test_streamed_text_never_splits_a_character():
    tokenizer = Bytes()
    prompt = list("Grüße: ".encode())
    generated = list("naïve 漢字 🙂 ok".encode())
    stream = TextStream(tokenizer, prompt)
    deltas = [stream.add([t]) for t in generated] + [stream.flush()]
    assert "".join(deltas) == "naïve 漢字 🙂 ok"
    assert not any("\ufffd" in delta for delta in deltas)
    # A character cut off at the end is flushed as U+FFFD, as decode gives it.
    stream = TextStream(tokenizer, prompt)
    cut = [stream.add([t]) for t in "ok 漢".encode()[:-1]] + [stream.flush()]
    assert "".join(cut) == tokenizer.decode(list("ok 漢".encode()[:-1]))


def test_streamed_text_keeps_the_space_of_the_first_piece():
    tokenizer = Pieces()
    stream = TextStream(tokenizer, [0])
    deltas = [stream.add([i]) for i in (1, 2, 3, 4, 5)]
    assert "".join(deltas) == " café is open!"
