"""`AutoRegressiveDecoder` on what bert4keras's decoder scripts need beyond
plain prompts: a conditional-LayerNorm model's `condition`, and `combine`,
several prompts sharing one output whose per-step probabilities are
combined (bert4keras's `use_states=True`), each against decoding written
here by full forward passes."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn
from keras_attn.generation import AutoRegressiveDecoder
from tests.generation.test_beam_search import reference_beam_search
from tests.generation.test_generate import CONFIG
from tests.generation.test_generate import randomize_condition_weights
from tests.generation.test_generate import uncached_greedy
from tests.harness import to_numpy

PAD = 0
PASSAGES = [[2, 7, 9], [2, 11, 5, 31, 8, 17, 4], [2, 21]]
SMALL = dict(CONFIG, num_hidden_layers=1)  # one block: less to compile


@pytest.fixture(scope="module")
def conditional_lm():
    keras.utils.set_random_seed(0)
    model = keras_attn.build_transformer_model(
        SMALL, application="lm", conditional_layer_norm=3, conditional_layer_norm_hidden_size=4
    )
    randomize_condition_weights(model)
    return model


@pytest.fixture(scope="module")
def unilm():
    keras.utils.set_random_seed(0)
    return keras_attn.build_transformer_model(SMALL, application="unilm")


def first_end(sequence, end):
    sequence = list(sequence)
    return np.array(sequence[: sequence.index(end) + 1] if end in sequence else sequence)


@pytest.mark.slow
def test_decoding_with_a_condition_equals_the_full_pass_given_it(conditional_lm):
    model = conditional_lm
    prompt = np.array([2, 11, 5, 31])
    condition = np.array([0.1, -0.2, 0.3], "float32")
    free = uncached_greedy(model, [prompt], 6, extra_inputs={"condition": condition[None]})[0]
    end = int(next(t for i, t in enumerate(free[:-1]) if i >= 1 and t not in free[:i]))
    decoder = AutoRegressiveDecoder(model, end_id=end, maxlen=6)
    greedy = uncached_greedy(model, [prompt], 6, end, extra_inputs={"condition": condition[None]})
    expected = first_end(greedy[0], end)
    assert len(expected) < 6  # the end id stopped it
    for inputs in (
        [prompt, condition],
        [prompt, np.zeros_like(prompt), condition],
        {"token_ids": prompt, "condition": condition},
    ):
        np.testing.assert_array_equal(decoder.beam_search(inputs, topk=1), expected)
    sequences, scores = reference_beam_search(
        model, [prompt], 6, 3, end_token_id=end, condition=condition[None]
    )
    outputs, decoder_scores = decoder.beam_search([prompt, condition], topk=3, return_all=True)
    for output, reference in zip(outputs, sequences[0]):
        np.testing.assert_array_equal(output, first_end(reference, end))
    np.testing.assert_allclose(decoder_scores, scores[0], rtol=1e-5)
    # Another condition: another output.
    other = decoder.beam_search([prompt, -2 * condition], topk=1)
    other_greedy = uncached_greedy(
        model, [prompt], 6, end, extra_inputs={"condition": -2 * condition[None]}
    )
    np.testing.assert_array_equal(other, first_end(other_greedy[0], end))
    assert len(other) != len(expected) or (other != expected).any()


def test_an_empty_prompt_starts_from_start_id_as_bert4keras_conditional_lm(conditional_lm):
    """bert4keras's `random_sample([[label]], n)`: no input tokens, the
    output starts with start_id; here `[[], condition]`."""
    decoder = AutoRegressiveDecoder(conditional_lm, start_id=2, maxlen=4)
    condition = np.array([1.0, 0.0, 0.0], "float32")
    expected = uncached_greedy(conditional_lm, [[2]], 4, extra_inputs={"condition": condition[None]})
    output = decoder.beam_search([[], condition], topk=1)
    np.testing.assert_array_equal(output, np.concatenate([[2], expected[0]]))


@pytest.mark.slow
def test_samples_follow_the_distribution_of_their_condition(conditional_lm):
    """One sampled token per sample, 600 samples per condition: the
    empirical distribution is closer (total variation) to the full pass's
    softmax under its own condition than under the other, and both
    conditions' softmaxes differ."""
    model = conditional_lm
    prompt = np.array([2, 7, 9])
    conditions = np.array([[2.0, 0.0, -1.0], [-2.0, 1.0, 1.0]], "float32")
    token_ids = np.tile(prompt, (2, 1))
    inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "condition": conditions}
    logits = to_numpy(model(inputs))
    logits = logits[:, -1].astype("float64")
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    assert 0.5 * np.abs(probabilities[0] - probabilities[1]).sum() > 0.2
    decoder = AutoRegressiveDecoder(model, maxlen=1)
    for index, condition in enumerate(conditions):
        samples = decoder.random_sample([prompt, condition], n=600, seed=index)
        counts = np.bincount([s[0] for s in samples], minlength=CONFIG["vocab_size"]) / 600
        distances = [0.5 * np.abs(counts - p).sum() for p in probabilities]
        assert distances[index] < 0.12 and distances[index] < distances[1 - index], distances


def test_condition_errors_name_the_expected_inputs(conditional_lm, unilm):
    decoder = AutoRegressiveDecoder(conditional_lm, maxlen=2)
    with pytest.raises(ValueError, match=r"\[token_ids, condition\]"):
        decoder.beam_search([[2, 5]], topk=1)
    with pytest.raises(ValueError, match="condition.*1-D; received shape \\(1, 3\\)"):
        decoder.beam_search([[2, 5], np.ones((1, 3))], topk=1)
    with pytest.raises(ValueError, match="need `start_id`"):
        decoder.beam_search([[], np.ones(3)], topk=1)
    with pytest.raises(ValueError, match="takes no `condition`"):
        AutoRegressiveDecoder(unilm, maxlen=2).beam_search({"token_ids": [2], "condition": [1.0]}, topk=1)


# combine ------------------------------------------------------------------


def passage_probabilities(model, passages, output, width=16):
    """The full pass's next-token softmax of every passage followed by
    `output` (segment 1 for UniLM), float64 `(passages, vocab)`; rows
    right-padded to `width` (one shape: JAX compiles its eager ops once)."""
    ids = np.full((len(passages), width), PAD, "int32")
    segments = np.zeros_like(ids)
    for row, passage in enumerate(passages):
        ids[row, : len(passage) + len(output)] = list(passage) + list(output)
        segments[row, len(passage) : len(passage) + len(output)] = 1
    logits = to_numpy(model({"token_ids": ids, "segment_ids": segments})).astype("float64")
    last = [logits[row, len(p) + len(output) - 1] for row, p in enumerate(passages)]
    last = np.array(last)
    probabilities = np.exp(last - last.max(-1, keepdims=True))
    return probabilities / probabilities.sum(-1, keepdims=True)


def reference_shared_greedy(model, passages, maxlen, end, choose):
    """Greedy decoding of one output shared by `passages`: at step t the
    token is the argmax of `choose(probabilities, t)`."""
    output = []
    for step in range(maxlen):
        output.append(int(np.argmax(choose(passage_probabilities(model, passages, output), step))))
        if output[-1] == end:
            break
    return np.array(output)


def reference_shared_beam_search(model, passages, maxlen, num_beams, end):
    """`Generator.beam_search`'s algorithm (finished beams kept among the
    beams, ties to the lowest beam * vocab + token) over the mean of the
    passages' probabilities, renormalised."""
    vocab = CONFIG["vocab_size"]
    beams = [[[], 0.0 if k == 0 else -np.inf, False] for k in range(num_beams)]
    while not all(finished for _, _, finished in beams):
        candidates = []
        for k, (output, score, finished) in enumerate(beams):
            if finished:
                candidates.append((score, k * vocab + PAD, k, PAD))
                continue
            mean = passage_probabilities(model, passages, output).mean(0)
            log_probabilities = np.log(mean / mean.sum())
            for token in range(vocab):
                candidates.append((score + log_probabilities[token], k * vocab + token, k, token))
        candidates.sort(key=lambda c: (-c[0], c[1]))
        new_beams = []
        for score, _, k, token in candidates[:num_beams]:
            output, _, finished = beams[k]
            if finished:
                new_beams.append([output, score, True])
            else:
                output = output + [token]
                new_beams.append([output, score, token == end or len(output) == maxlen])
        beams = new_beams
    beams.sort(key=lambda beam: -beam[1])
    return [np.array(output) for output, _, _ in beams], np.array([s for _, s, _ in beams])


def mean_over_passages(probabilities, states):
    return ops.mean(probabilities, axis=0), states


@pytest.mark.slow
def test_combined_greedy_decoding_equals_the_full_pass_reference(unilm):
    free = reference_shared_greedy(unilm, PASSAGES, 6, None, lambda p, t: p.mean(0))
    end = int(next(t for i, t in enumerate(free[:-1]) if i >= 1 and t not in free[:i]))
    decoder = AutoRegressiveDecoder(unilm, end_id=end, maxlen=6, combine=mean_over_passages)
    expected = reference_shared_greedy(unilm, PASSAGES, 6, end, lambda p, t: p.mean(0))
    assert len(expected) < 6
    np.testing.assert_array_equal(decoder.beam_search(PASSAGES, topk=1), expected)
    # Each passage alone decodes something else: the combination matters.
    alone = [reference_shared_greedy(unilm, [p], 6, end, lambda p, t: p[0]) for p in PASSAGES]
    assert any(len(a) != len(expected) or (a != expected).any() for a in alone)


@pytest.mark.slow
def test_combined_beam_search_equals_the_full_pass_reference(unilm):
    free = reference_shared_greedy(unilm, PASSAGES, 6, None, lambda p, t: p.mean(0))
    end = int(next(t for i, t in enumerate(free[:-1]) if i >= 1 and t not in free[:i]))
    decoder = AutoRegressiveDecoder(unilm, end_id=end, maxlen=6, combine=mean_over_passages)
    outputs, scores = decoder.beam_search(PASSAGES, topk=3, return_all=True)
    expected_outputs, expected_scores = reference_shared_beam_search(unilm, PASSAGES, 6, 3, end)
    assert any(len(output) < 6 for output in expected_outputs)  # some beam ended early
    for output, reference in zip(outputs, expected_outputs):
        np.testing.assert_array_equal(output, reference)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-4)


def test_states_are_carried_from_step_to_step(unilm):
    """`combine` follows passage `states % 3` and counts the steps: the
    output is the greedy decode that takes step t's token from passage
    t % 3 alone."""

    def follow_one_passage(probabilities, states):
        return ops.take(probabilities, ops.mod(states, 3), axis=0), states + 1

    decoder = AutoRegressiveDecoder(unilm, maxlen=5, combine=follow_one_passage)
    expected = reference_shared_greedy(unilm, PASSAGES, 5, None, lambda p, t: p[t % 3])
    np.testing.assert_array_equal(decoder.beam_search(PASSAGES, topk=1, states=0), expected)
    # Starting the count at 1 follows other passages, and decodes otherwise.
    shifted = decoder.beam_search(PASSAGES, topk=1, states=1)
    np.testing.assert_array_equal(
        shifted, reference_shared_greedy(unilm, PASSAGES, 5, None, lambda p, t: p[(t + 1) % 3])
    )
    assert (shifted != expected).any()


def test_random_sample_draws_from_the_combined_probabilities(unilm):
    """A `combine` that keeps only the mean's most probable token: every
    sample is the combined greedy decode, whatever the seed."""

    def only_the_best(probabilities, states):
        mean = ops.mean(probabilities, axis=0)
        return ops.cast(ops.equal(mean, ops.max(mean, axis=-1, keepdims=True)), "float32"), states

    decoder = AutoRegressiveDecoder(unilm, start_id=4, maxlen=4, combine=only_the_best)
    samples = decoder.random_sample(PASSAGES, n=3, seed=5)
    output = [4]  # forced first, then the combined argmax after it
    for _ in range(4):
        output.append(int(np.argmax(passage_probabilities(unilm, PASSAGES, output).mean(0))))
    for sample in samples:
        np.testing.assert_array_equal(sample, output)


def test_combine_errors(unilm, conditional_lm):
    with pytest.raises(ValueError, match="`combine` must be None or a callable"):
        AutoRegressiveDecoder(unilm, maxlen=2, combine=3)
    with pytest.raises(ValueError, match="conditional_layer_norm"):
        AutoRegressiveDecoder(conditional_lm, maxlen=2, combine=mean_over_passages)
    decoder = AutoRegressiveDecoder(unilm, maxlen=2, combine=lambda p, s: (p[0, 0], s))
    with pytest.raises(ValueError, match=r"shape \(rows, vocab\) = \(1, 40\).*\(40,\)"):
        decoder.beam_search(PASSAGES, topk=1)
    with pytest.raises(ValueError, match="prompt 1 must be 1-D"):
        decoder.beam_search([[2, 5], []], topk=1)
    with pytest.raises(ValueError, match="`states` is the state of a `combine` hook"):
        AutoRegressiveDecoder(unilm, maxlen=2).beam_search([[2, 5]], topk=1, states=0)
