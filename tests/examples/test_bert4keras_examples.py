"""The examples of examples/bert4keras: their quick modes run to the end
and beat their baselines (slow: `pytest -m slow`), and the span bookkeeping,
ROUGE-N and the UniLM targets match hand-written expectations."""

import json
import os

import numpy as np
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
def test_seq2seq_autotitle_quick_mode(tmp_path):
    output = run(os.path.join("bert4keras", "seq2seq_autotitle.py"), "--quick", "--output", str(tmp_path))
    assert "Held-out titles" in output
    with open(tmp_path / "seq2seq_autotitle.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    # Training lowers the title-token loss on modules it never saw.
    assert results["held_out_loss_trained"] < results["held_out_loss_untrained"] - 0.3, results
    # Beam search outputs end at [SEP] or stop at the title's maxlen.
    assert len(results["generated_ids"]) == results["held_out_pairs"]
    for ids in results["generated_ids"]:
        assert 1 <= len(ids) <= results["title_maxlen"]
        ends = [i for i, token in enumerate(ids) if token == results["end_id"]]
        assert ends in ([len(ids) - 1], []), ids
        assert ends or len(ids) == results["title_maxlen"], ids
    assert len(results["callback"]) == results["epochs"]
    for scores in [*results["scores"].values(), *results["callback"]]:
        for measure in ("rouge_1", "rouge_2", "rouge_l"):
            assert 0.0 <= scores[measure] <= 1.0, scores


def test_rouge_n_counts_shared_n_grams_by_hand():
    common = _example_module("common")
    prediction = "the cat sat on the mat".split()
    reference = "the cat lay on the mat".split()
    # Unigrams: the x2, cat, on, mat shared (5 of 6 each way).
    assert common.rouge_n(prediction, reference, 1) == pytest.approx(5 / 6)
    # Bigrams: (the cat), (on the), (the mat) shared, 3 of 5 each way.
    assert common.rouge_n(prediction, reference, 2) == pytest.approx(3 / 5)
    # Repeated n-grams count as often as both sides have them.
    precision, recall = 1 / 3, 1 / 1
    assert common.rouge_n(["a", "a", "a"], ["a"], 1) == pytest.approx(
        2 * precision * recall / (precision + recall)
    )
    assert common.rouge_n(["a"], ["a", "b"], 2) == 0.0
    scores = common.rouge_scores(["the cat sat"], ["the cat"])
    assert scores == pytest.approx({"rouge_1": 0.8, "rouge_2": 2 / 3, "rouge_l": 0.8})


def test_unilm_targets_are_the_next_target_segment_token():
    common = _example_module("common")
    # [CLS] s1 s2 [SEP] t1 t2 [SEP] [PAD]: ids 2 10 11 3 20 21 3 0.
    token_ids = np.array([[2, 10, 11, 3, 20, 21, 3, 0]])
    segment_ids = np.array([[0, 0, 0, 0, 1, 1, 1, 0]])
    targets = common.unilm_targets(token_ids, segment_ids)
    # Position 3 ([SEP] of the source) predicts t1, ..., position 5 the final [SEP].
    np.testing.assert_array_equal(targets, [[0, 0, 0, 20, 21, 3, 0, 0]])
    np.testing.assert_array_equal(common.unilm_targets(token_ids, segment_ids, ignore_id=-1),
                                  [[-1, -1, -1, 20, 21, 3, -1, -1]])


@pytest.mark.slow
def test_bert_of_theseus_quick_mode(tmp_path):
    output = run(os.path.join("bert4keras", "bert_of_theseus.py"), "--quick", "--output", str(tmp_path))
    assert "successor_after_theseus: 1 blocks" in output
    with open(tmp_path / "bert_of_theseus.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    successor, predecessor = results["successor_after_theseus"], results["predecessor"]
    # The successor that runs alone has the depth asked for, and fewer weights.
    assert (successor["layers"], predecessor["layers"]) == (1, 2)
    assert successor["encoder_parameters"] < predecessor["encoder_parameters"]
    # Alone, after Theseus training, it classifies well above chance.
    assert successor["held_out_accuracy"] > results["majority_class"] + 0.15, results


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
