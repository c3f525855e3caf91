"""The examples of examples/bert4keras: their quick modes run to the end
and beat their baselines (slow: `pytest -m slow`), and the span bookkeeping
matches hand-written expectations."""

import json
import os

import pytest

from tests.examples.test_examples import _example_module, run


@pytest.mark.slow
@pytest.mark.parametrize("script", ["crf_ner", "global_pointer_ner"])
def test_quick_mode_beats_the_character_baseline(script, tmp_path):
    output = run(os.path.join("bert4keras", script + ".py"), "--quick", "--output", str(tmp_path))
    assert "held-out span F1" in output
    with open(tmp_path / f"{script}.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    assert results["span_f1"]["f1"] > results["baseline_span_f1"]["f1"] + 0.1, results


def test_bio_tags_round_trip_and_spans_of_a_line():
    spans_module = _example_module("bert4keras.python_spans")
    line = "if x1 in 'ab': return 10"
    spans = spans_module.line_spans(line)
    keyword, name, number, string = range(4)
    assert spans == [
        (keyword, 0, 1), (name, 3, 4), (keyword, 6, 7), (string, 9, 12),
        (keyword, 15, 20), (number, 22, 23),
    ]
    tags = spans_module.bio_tags(line, spans)
    assert tags[:6] == [1, 2, 0, 3, 4, 0]
    assert spans_module.bio_spans(tags) == spans
    # An I without its B still starts a span.
    assert spans_module.bio_spans([0, 4, 4, 0, 1]) == [(name, 1, 2), (keyword, 4, 4)]
    scores = spans_module.span_f1([[(0, 0, 1), (1, 3, 4)]], [[(0, 0, 1), (2, 5, 5)]])
    assert scores == {"f1": 0.5, "precision": 0.5, "recall": 0.5}


@pytest.mark.slow
def test_conditional_layer_norm_quick_mode(tmp_path):
    run(os.path.join("bert4keras", "conditional_layer_norm.py"), "--quick", "--output", str(tmp_path))
    with open(tmp_path / "conditional_layer_norm.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    assert results["held_out_nll_true_condition"] < results["held_out_nll_untrained"]
    # The model uses its condition: the true package predicts better.
    assert results["held_out_nll_true_condition"] < results["held_out_nll_shuffled_condition"]
    # Lines sampled per condition, named by a bigram classifier independent of the model.
    # The condition steers sampling: more samples than chance read as their package.
    assert results["sample_classifier_agreement"] > results["chance"] + 0.05, results
    assert len(results["sample_examples"]) == len(results["packages"])


@pytest.mark.slow
def test_albert_classification_quick_mode(tmp_path):
    run(os.path.join("bert4keras", "albert_classification.py"), "--quick", "--output", str(tmp_path))
    with open(tmp_path / "albert_classification.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    # Shared blocks and factorised embeddings: far fewer parameters.
    assert results["albert"]["encoder_parameters"] < 0.6 * results["bert"]["encoder_parameters"]
    for name in ("albert", "bert"):
        assert 0.0 <= results[name]["held_out_accuracy"] <= 1.0


@pytest.mark.slow
def test_reading_comprehension_quick_mode_combines_the_passages(tmp_path):
    script = os.path.join("bert4keras", "reading_comprehension_seq2seq.py")
    output = run(script, "--quick", "--output", str(tmp_path))
    assert "vote (bert4keras)" in output
    with open(tmp_path / "reading_comprehension_seq2seq.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    methods = results["methods"]
    vote, random_passage = methods["vote (bert4keras)"], methods["one random passage"]
    # Reading every passage beats reading one at random, and the model beats
    # the answer it would give without reading.
    assert vote["word_f1"] > random_passage["word_f1"] + 0.1, methods
    assert vote["word_f1"] > methods["most frequent training answer"]["word_f1"] + 0.1, methods
    # The plain mean drowns the answering passage in the others' end token.
    assert vote["word_f1"] > methods["mean"]["word_f1"], methods
