"""Beam search (`Generator.beam_search`, `BeamSearch`), `start_token_id`
and the bert4keras-style `AutoRegressiveDecoder`, against a beam search
written here over uncached logits."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import AutoRegressiveDecoder
from keras_attn.generation import Generator
from keras_attn.samplers import BeamSearch
from tests.generation.test_generate import CONFIG
from tests.generation.test_generate import PROMPTS
from tests.generation.test_generate import padded_prompts
from tests.generation.test_generate import randomize_condition_weights
from tests.generation.test_generate import uncached_greedy
from tests.harness import to_numpy

PAD = 0
MAX_NEW_TOKENS = 6


def log_softmax(logits):
    logits = logits.astype("float64")
    shifted = logits - logits.max()
    return (shifted - np.log(np.exp(shifted).sum())).astype("float32")


def reference_beam_search(model, prompts, max_new_tokens, num_beams, length_penalty=0.0,
                          end_token_id=None, min_new_tokens=0, start_token_id=None,
                          condition=None):
    """Beam search as `Generator.beam_search` documents it, one row at a time
    in plain Python, each step's logits from the full uncached pass over
    every beam's whole sequence (all beams of all rows at one padded width,
    so JAX compiles its eager ops once). `condition`: one row per prompt,
    given to each of its beams."""
    unilm = model.application == "unilm"
    vocab = CONFIG["vocab_size"]
    width = max(len(p) for p in prompts) + max_new_tokens
    # Each beam: [generated tokens, score, finished].
    rows = [
        [[[], np.float32(0.0 if k == 0 else -np.inf), False] for k in range(num_beams)]
        for _ in prompts
    ]
    if start_token_id is not None:
        for beams in rows:
            for beam in beams:
                beam[0].append(start_token_id)
                beam[2] = max_new_tokens == 1
    while not all(beam[2] for beams in rows for beam in beams):
        ids = np.full((len(prompts) * num_beams, width), PAD, "int32")
        segments = np.zeros_like(ids)
        for r, (prompt, beams) in enumerate(zip(prompts, rows)):
            for k, (generated, _, _) in enumerate(beams):
                ids[r * num_beams + k, : len(prompt) + len(generated)] = list(prompt) + generated
                segments[r * num_beams + k, len(prompt) :] = 1 if unilm else 0
        inputs = {"token_ids": ids}
        if "segment_ids" in model.input_contract.names:
            inputs["segment_ids"] = segments
        if condition is not None:
            inputs["condition"] = np.repeat(condition, num_beams, axis=0)
        logits = to_numpy(model(inputs))
        for r, (prompt, beams) in enumerate(zip(prompts, rows)):
            candidates = []  # (score, beam * vocab + token, beam, token)
            for k, (generated, score, finished) in enumerate(beams):
                if finished:
                    candidates.append((score, k * vocab + PAD, k, PAD))
                    continue
                log_probs = log_softmax(logits[r * num_beams + k, len(prompt) + len(generated) - 1])
                if end_token_id is not None and len(generated) < min_new_tokens:
                    log_probs[end_token_id] = -np.inf
                for token in range(vocab):
                    candidates.append((np.float32(score + log_probs[token]), k * vocab + token, k, token))
            candidates.sort(key=lambda c: (-c[0], c[1]))
            new_beams = []
            for score, _, k, token in candidates[:num_beams]:
                generated, _, finished = beams[k]
                if finished:
                    new_beams.append([generated, score, True])
                    continue
                generated = generated + [token]
                ended = token == end_token_id or len(generated) == max_new_tokens
                new_beams.append([generated, score, ended])
            rows[r] = new_beams
    sequences, scores = [], []
    for beams in rows:
        normalised = [
            np.float32(score / np.float32(len(generated)) ** np.float32(length_penalty))
            for generated, score, _ in beams
        ]
        order = sorted(range(num_beams), key=lambda k: -normalised[k])
        sequences.append([beams[k][0] + [PAD] * (max_new_tokens - len(beams[k][0])) for k in order])
        scores.append([normalised[k] for k in order])
    return np.array(sequences), np.array(scores, "float32")


def middle_token(sequences):
    """A token some beam first generates at a middle step (2 or later, before
    the last): as an end id it stops that beam early. The tests check that
    some beam did end early."""
    beams = sequences.reshape(-1, sequences.shape[-1])
    for step in range(2, sequences.shape[-1] - 1):
        for beam in beams:
            if beam[step] not in beam[:step]:
                return int(beam[step])
    raise AssertionError("every beam repeats its first tokens")


@pytest.mark.parametrize(
    "variant, application, options, start_token_id",
    [("bert", "lm", {}, None), ("roberta+", "unilm", {"attention_key_size": 12}, 4)],
)
def test_beam_search_equals_the_reference_over_uncached_logits(
    variant, application, options, start_token_id
):
    model = keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, **options
    )
    free, _ = reference_beam_search(model, PROMPTS, MAX_NEW_TOKENS, 3, start_token_id=start_token_id)
    end = middle_token(free)
    settings = dict(
        length_penalty=1.0, end_token_id=end, min_new_tokens=2, start_token_id=start_token_id
    )
    expected_sequences, expected_scores = reference_beam_search(
        model, PROMPTS, MAX_NEW_TOKENS, 3, **settings
    )
    # The reference is the search that keeps finished beams among the beams;
    # transformers' (the default) is tested in test_beam_search_transformers.py.
    sequences, scores = Generator(model).beam_search(
        PROMPTS, MAX_NEW_TOKENS, 3, early_stopping="all_finished", **settings
    )
    assert sequences.shape == (3, 3, MAX_NEW_TOKENS) and scores.dtype == np.float32
    np.testing.assert_array_equal(sequences, expected_sequences)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5)
    # The case is not vacuous: some beam ended early and is padded after its end.
    ended = np.argwhere(sequences[:, :, :-1] == end)
    assert len(ended) and (sequences[tuple(ended[0][:2])][ended[0][2] + 1 :] == PAD).all()
    # The k best, best first.
    assert (np.diff(scores, axis=1) <= 0).all()
    if start_token_id is not None:
        assert (sequences[:, :, 0] == start_token_id).all()


def test_one_beam_is_greedy_decoding_and_start_token_id_is_the_first_token():
    """Greedy decoding and one beam, both with a start token, equal greedy
    decoding written here from the prompts extended by it (an lm model: the
    start token is one more causal token)."""
    model = keras_attn.build_transformer_model(CONFIG, variant="bert", application="lm")
    extended = [list(p) + [4] for p in PROMPTS]
    expected = uncached_greedy(model, extended, MAX_NEW_TOKENS - 1)
    for sampler in ["greedy", BeamSearch(num_beams=1)]:
        generated = model.generate(
            PROMPTS, max_new_tokens=MAX_NEW_TOKENS, sampler=sampler, start_token_id=4
        )
        assert (generated[:, 0] == 4).all()
        np.testing.assert_array_equal(generated[:, 1:], expected)


def test_the_decoder_ports_bert4keras_beam_search_and_random_sample():
    model = keras_attn.build_transformer_model(
        CONFIG, variant="roberta+", application="unilm", attention_key_size=12
    )
    source = np.array([2, 11, 5, 31, 8])
    free, _ = reference_beam_search(model, [source], 5, 3, start_token_id=4)
    end = middle_token(free)
    decoder = AutoRegressiveDecoder(model, start_id=4, end_id=end, maxlen=4, minlen=2)
    # maxlen=4 ids after the start id; minlen=2 output ids before the end id may come.
    sequences, scores = reference_beam_search(
        model, [source], 5, 3, end_token_id=end, min_new_tokens=1, start_token_id=4
    )
    best = decoder.beam_search([source, np.zeros_like(source)], topk=3)
    outputs, decoder_scores = decoder.beam_search([source], topk=3, return_all=True)
    expected = []
    for sequence in sequences[0]:
        ends = list(sequence).index(end) + 1 if end in sequence else len(sequence)
        expected.append(sequence[:ends])
    assert any(len(e) < 5 for e in expected)  # some beam ended at the end id
    np.testing.assert_array_equal(best, expected[0])
    assert len(outputs) == 3
    for output, reference in zip(outputs, expected):
        np.testing.assert_array_equal(output, reference)
    np.testing.assert_allclose(decoder_scores, scores[0], rtol=1e-5)

    samples = decoder.random_sample([source], n=4, topk=10, temperature=2.0, seed=7)
    again = decoder.random_sample([source, [0] * 5], n=4, topk=10, temperature=2.0, seed=7)
    other = decoder.random_sample([source], n=4, topk=10, temperature=2.0, seed=8)
    assert len(samples) == 4 and all(s[0] == 4 and 2 <= len(s) <= 5 for s in samples)
    for sample, repeat in zip(samples, again):
        np.testing.assert_array_equal(sample, repeat)
    assert any(len(a) != len(b) or (a != b).any() for a, b in zip(samples, other))


def test_beam_search_config_and_registry():
    beam = keras_attn.samplers.get("beam")
    assert isinstance(beam, BeamSearch) and beam.num_beams == 4
    restored = keras_attn.samplers.get(
        {"class_name": "BeamSearch", "config": {"num_beams": 3, "length_penalty": 0.5}}
    )
    assert restored.get_config() == {"num_beams": 3, "length_penalty": 0.5, "early_stopping": False}
    assert BeamSearch.from_config(restored.get_config()).num_beams == 3
    assert keras.saving.get_registered_object("keras_attn>BeamSearch") is BeamSearch
    assert keras_attn.AutoRegressiveDecoder is AutoRegressiveDecoder
    assert keras_attn.Generator is Generator


@pytest.mark.parametrize("num_beams", [0, -1, 2.5, True])
def test_a_beam_width_below_one_is_an_error(num_beams):
    with pytest.raises(ValueError, match=f"num_beams.*{num_beams!r}"):
        BeamSearch(num_beams)


def test_more_beams_than_tokens_is_an_error_naming_both():
    """A vocabulary of 6 tokens: 6 beams run, 7 cannot all be distinct."""
    model = keras_attn.build_transformer_model(
        dict(CONFIG, vocab_size=6), variant="bert", application="unilm"
    )
    assert model.generate([[2, 5]], 2, sampler=BeamSearch(num_beams=6)).shape == (1, 2)
    with pytest.raises(ValueError, match=r"num_beams=7\).*vocab_size=6"):
        model.generate([[2, 5]], 2, sampler=BeamSearch(num_beams=7))
    with pytest.raises(ValueError, match=r"num_beams=7\).*vocab_size=6"):
        AutoRegressiveDecoder(model, end_id=3, maxlen=2).beam_search([[2, 5]], topk=7)


def test_bad_decoder_requests_are_errors():
    model = keras_attn.build_transformer_model(CONFIG, variant="bert", application="unilm")
    decoder = AutoRegressiveDecoder(model, end_id=3, maxlen=3)
    with pytest.raises(ValueError, match="num_beams.*0"):
        Generator(model).beam_search([[2, 5]], 3, num_beams=0)
    with pytest.raises(ValueError, match="only min_ends=1.*min_ends=2"):
        decoder.beam_search([[2, 5]], topk=2, min_ends=2)
    with pytest.raises(ValueError, match=r"wrap it as \[token_ids\]"):
        decoder.beam_search([2, 5], topk=2)
    with pytest.raises(ValueError, match=r"`token_ids` must be one example's ids, 1-D; received shape \(2, 2\)"):
        decoder.random_sample([[[2, 5], [2, 6]]], n=2)
    with pytest.raises(ValueError, match="`segment_ids` must be UniLM's layout"):
        decoder.beam_search([[2, 5], [1, 0]], topk=2)
    with pytest.raises(ValueError, match="one example as a list"):
        decoder.beam_search([[2, 5], [0, 0], [0, 0]], topk=2)
    with pytest.raises(ValueError, match="maxlen"):
        AutoRegressiveDecoder(model, end_id=3)
    with pytest.raises(ValueError, match="start_token_id=40.*outside the vocabulary"):
        model.generate([[2, 5]], max_new_tokens=2, start_token_id=40)


def test_conditional_layer_norm_model_beam_search_follows_each_prompts_condition():
    """Each prompt's condition goes to each of its beams (a beam fed another
    prompt's condition scores differently)."""
    model = keras_attn.build_transformer_model(
        CONFIG, application="lm", conditional_layer_norm=3
    )
    randomize_condition_weights(model)
    condition = np.random.default_rng(1).normal(size=(len(PROMPTS), 3)).astype("float32")
    prompts = padded_prompts(PROMPTS)
    sequences, scores = Generator(model).beam_search(dict(prompts, condition=condition), 4, 2)
    expected, expected_scores = reference_beam_search(model, PROMPTS, 4, 2, condition=condition)
    np.testing.assert_array_equal(sequences, expected)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5)
    _, other_scores = reference_beam_search(model, PROMPTS, 4, 2, condition=condition[::-1])
    assert np.abs(other_scores - expected_scores).max() > 1e-3
