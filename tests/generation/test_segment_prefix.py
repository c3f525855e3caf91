"""Generation after a segment-1 prefix: UniLM's layout (the source is
segment 0, the start of the target segment 1, the generated tokens continue
it), as bert4keras's question generation decodes a question after the
answer it appended to the passage. Against greedy decoding and scores
written here by full passes over the same ids and segments."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import AutoRegressiveDecoder
from tests.generation.test_generate import CONFIG
from tests.harness import to_numpy

SMALL = dict(CONFIG, num_hidden_layers=1)
# Each row: a source (segment 0) and a target prefix (segment 1); the last
# row has none. The rows' lengths differ: the longer ones read their prompt
# while the shortest decodes.
SOURCES = [[2, 7, 9, 3], [2, 11, 5, 31, 8, 3], [2, 21, 3]]
PREFIXES = [[12, 6], [17], []]
MAX_NEW_TOKENS = 4


@pytest.fixture(scope="module")
def unilm():
    # The subject is the segments, not compilation: torch decodes eagerly.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
        keras.utils.set_random_seed(0)
        yield keras_attn.build_transformer_model(SMALL, application="unilm")


def log_softmax(logits):
    logits = logits.astype("float64")
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def full_pass_greedy(model, sources, prefixes, max_new_tokens):
    """Greedy decoding by the full pass over each row's whole sequence at
    every step: its source as segment 0, then its prefix and the tokens so
    far as segment 1, rows filled to one width (one shape: JAX compiles its
    eager ops once) with segment-1 tokens, which UniLM's mask hides from
    the tokens before them; the argmax at each row's last token is next.
    Returns the tokens and the log-softmax of each, `(rows, steps)`."""
    targets = [list(prefix) for prefix in prefixes]
    width = max(len(s) + len(p) for s, p in zip(sources, prefixes)) + max_new_tokens
    chosen = np.zeros((len(sources), max_new_tokens))
    for step in range(max_new_tokens):
        ids = np.zeros((len(sources), width), "int32")
        segment_ids = np.zeros_like(ids)
        for row, (source, target) in enumerate(zip(sources, targets)):
            ids[row, : len(source) + len(target)] = source + target
            segment_ids[row, len(source) :] = 1
        logits = to_numpy(model({"token_ids": ids, "segment_ids": segment_ids}))
        for row, (source, target) in enumerate(zip(sources, targets)):
            scores = log_softmax(logits[row, len(source) + len(target) - 1])
            target.append(int(np.argmax(scores)))
            chosen[row, step] = scores[target[-1]]
    tokens = np.array([target[len(prefix) :] for target, prefix in zip(targets, prefixes)])
    return tokens, chosen


def prompt_dict(sources, prefixes):
    """The prompts as `generate` takes them with segments: right-padded
    `token_ids`, their `padding_mask`, `segment_ids` 1 on each prefix."""
    width = max(len(s) + len(p) for s, p in zip(sources, prefixes))
    ids = np.zeros((len(sources), width), "int32")
    mask = np.zeros_like(ids)
    segment_ids = np.zeros_like(ids)
    for row, (source, prefix) in enumerate(zip(sources, prefixes)):
        length = len(source) + len(prefix)
        ids[row, :length], mask[row, :length] = source + prefix, 1
        segment_ids[row, len(source) : length] = 1
    return {"token_ids": ids, "padding_mask": mask, "segment_ids": segment_ids}


def test_generate_continues_a_segment_one_prefix_as_the_full_pass(unilm):
    expected, _ = full_pass_greedy(unilm, SOURCES, PREFIXES, MAX_NEW_TOKENS)
    prompts = prompt_dict(SOURCES, PREFIXES)
    np.testing.assert_array_equal(unilm.generate(prompts, MAX_NEW_TOKENS), expected)
    # The same ids read all as the source decode otherwise: the segments
    # are what the test checks.
    whole = [source + prefix for source, prefix in zip(SOURCES, PREFIXES)]
    as_source, _ = full_pass_greedy(unilm, whole, [[]] * len(whole), MAX_NEW_TOKENS)
    assert (as_source[:2] != expected[:2]).any()
    without_segments = {key: prompts[key] for key in ("token_ids", "padding_mask")}
    np.testing.assert_array_equal(unilm.generate(without_segments, MAX_NEW_TOKENS), as_source)


def test_decoder_after_an_appended_answer_equals_the_full_pass(unilm):
    """bert4keras's question generation: the answer appended to the passage
    as segment 1, then the question decoded after it. With one beam the
    output is the greedy one and its score the sum of its tokens'
    log-probabilities, each step's full-pass logits."""
    passage, answer = SOURCES[1], [17, 12, 6]
    token_ids, segment_ids = passage + answer, [0] * len(passage) + [1] * len(answer)
    decoder = AutoRegressiveDecoder(unilm, maxlen=MAX_NEW_TOKENS)
    outputs, scores = decoder.beam_search([token_ids, segment_ids], topk=1, return_all=True)
    expected, log_probabilities = full_pass_greedy(unilm, [passage], [answer], MAX_NEW_TOKENS)
    np.testing.assert_array_equal(outputs[0], expected[0])
    np.testing.assert_allclose(scores[0], log_probabilities[0].sum(), rtol=1e-5)


def test_other_segment_layouts_are_errors_naming_segment_ids(unilm):
    prompts = prompt_dict(SOURCES, PREFIXES)
    prompts["segment_ids"][1, 2] = 1  # a 1 inside the source
    with pytest.raises(ValueError, match=r"prompt 1's `segment_ids` must be UniLM's layout"):
        unilm.generate(prompts, 2)
    prompts["segment_ids"] = prompts["segment_ids"][:, :-1]
    with pytest.raises(ValueError, match="'segment_ids' has shape"):
        unilm.generate(prompts, 2)
    decoder = AutoRegressiveDecoder(unilm, maxlen=2)
    with pytest.raises(ValueError, match=r"`segment_ids` must be UniLM's layout.*\[0, 1, 0\]"):
        decoder.beam_search([[2, 5, 3], [0, 1, 0]], topk=1)
    with pytest.raises(ValueError, match=r"`segment_ids` must be UniLM's layout.*\[0, 2\]"):
        decoder.beam_search([[2, 5], [0, 2]], topk=1)
    with pytest.raises(ValueError, match="`segment_ids` must have the length of token_ids"):
        decoder.beam_search([[2, 5, 3], [0, 1]], topk=1)


def test_a_causal_lm_takes_segment_zero_only():
    lm = keras_attn.build_transformer_model(SMALL, application="lm")
    prompts = prompt_dict(SOURCES, PREFIXES)
    with pytest.raises(ValueError, match=r"prompt 0's `segment_ids` must be all 0 .*'lm'"):
        lm.generate(prompts, 2)
    with pytest.raises(ValueError, match=r"`segment_ids` must be all 0 .*application='unilm'"):
        AutoRegressiveDecoder(lm, maxlen=2).beam_search([[2, 5, 3], [0, 0, 1]], topk=1)
