"""Each example's quick mode runs to the end (slow: `pytest -m slow`)."""

import importlib
import importlib.util
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

RESEARCH_EXAMPLES = [
    ("attention_basics.py", "attention_basics"),
    ("key_size_bottleneck.py", "key_size_bottleneck"),
    ("talking_heads.py", "talking_heads"),
    ("tta_vs_mlm.py", "tta_vs_mlm"),
    ("length_extrapolation.py", "length_extrapolation"),
]


def run(script, *arguments):
    # The example imports this checkout's keras_attn, whichever is installed.
    checkout = os.path.abspath(os.path.join(EXAMPLES, ".."))
    environment = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))
    )
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *arguments],
        capture_output=True,
        text=True,
        timeout=900,
        env=environment,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def assert_plotted(path):
    """The example's plot exists, where the `[examples]` extra (matplotlib)
    is installed; without it the example writes its JSON only."""
    if importlib.util.find_spec("matplotlib") is not None:
        assert path.stat().st_size > 0
    else:
        assert not path.exists()


@pytest.mark.slow
def test_quickstart(tmp_path):
    output = run("quickstart.py", "--quick", "--output", str(tmp_path))
    assert "equal to 1e-5" in output
    with open(tmp_path / "quickstart.json") as file:
        results = json.load(file)
    assert results["max_cosine_difference_vs_transformers"] <= 1e-5
    assert results["reload_max_difference"] <= 1e-5
    # Fine-tuned on 144 lines of three packages, it beats the majority class.
    assert results["held_out_accuracy"] > results["majority_class"] + 0.1


@pytest.mark.slow
def test_finetune_classifier_quick_mode(tmp_path):
    assert "held-out accuracy" in run("finetune_classifier.py", "--quick", "--output", str(tmp_path))
    assert_plotted(tmp_path / "finetune_classifier.png")


@pytest.mark.slow
@pytest.mark.parametrize("script, name", RESEARCH_EXAMPLES)
def test_research_example_quick_mode(script, name, tmp_path):
    run(script, "--quick", "--output", str(tmp_path))
    with open(tmp_path / f"{name}.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    assert_plotted(tmp_path / f"{name}.png")


@pytest.mark.slow
def test_seq2seq_docstrings_quick_mode(tmp_path):
    output = run("seq2seq_docstrings.py", "--quick", "--output", str(tmp_path))
    assert "Held-out docstring summaries" in output
    with open(tmp_path / "seq2seq_docstrings.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    scores = results["seq2seq"]["scores"]
    for decoder in ("greedy", "top-p 0.9 (T=0.8, seed 0)", "nearest-neighbour baseline"):
        assert 0.0 <= scores[decoder]["word_f1"] <= 1.0
    lm = results["windowed_lm"]
    # The windowed cache holds the window's keys however long the generation;
    # without a window it holds every position.
    assert lm["attention_window=64"]["cache_capacity"] == 64
    assert lm["full attention"]["cache_capacity"] == lm["length"]
    assert len(lm["attention_window=64"]["generated"]) > 0
    # Within the training length the window sees every earlier position.
    np.testing.assert_allclose(
        lm["attention_window=64"]["nll_by_block"][0], lm["full attention"]["nll_by_block"][0],
        rtol=1e-4,
    )
    assert_plotted(tmp_path / "seq2seq_docstrings.png")


@pytest.mark.slow
def test_t5_docstrings_quick_mode(tmp_path):
    output = run("t5_docstrings.py", "--quick", "--output", str(tmp_path))
    assert "Held-out pairs" in output
    with open(tmp_path / "t5_docstrings.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    t5, gpt2 = results["t5"], results["gpt2"]
    assert 0.0 <= t5["held_out_token_accuracy"] <= 1.0
    # Perplexities of models trained from random weights: finite, below a
    # uniform guess over the vocabulary.
    for perplexity in (t5["held_out_summary_perplexity"], gpt2["held_out_perplexity"],
                       gpt2["held_out_summary_perplexity"],
                       t5["held_out_summary_perplexity_other_signatures"],
                       gpt2["held_out_summary_perplexity_other_signatures"]):
        assert 1.0 < perplexity < results["vocab_size"]
    for decoder in ("T5 greedy", "T5 beam search (4 beams)", "GPT-2 greedy", "nearest-neighbour baseline"):
        assert 0.0 <= results["scores"][decoder]["word_f1"] <= 1.0
    assert set(results["samples"][0]) >= {"signature", "reference", "T5 greedy", "GPT-2 greedy"}
    assert_plotted(tmp_path / "t5_docstrings.png")


def _example_module(name):
    sys.path.insert(0, EXAMPLES)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(EXAMPLES)


def test_docstring_scores_against_brute_force():
    """The docstring examples' ROUGE-L (dynamic programming) and word F1
    against the longest common subsequence found by trying every
    subsequence, and against counting shared words one by one."""
    example = _example_module("common")
    rng = np.random.default_rng(0)
    words = ["return", "the", "a", "file", "of"]
    for _ in range(200):
        prediction = list(rng.choice(words, rng.integers(0, 7)))
        reference = list(rng.choice(words, rng.integers(1, 7)))
        longest = max(
            (
                size
                for size in range(len(prediction) + 1)
                for chosen in itertools.combinations(prediction, size)
                if _is_subsequence(chosen, reference)
            ),
            default=0,
        )
        shared, remaining = 0, list(reference)
        for word in prediction:
            if word in remaining:
                remaining.remove(word)
                shared += 1
        for measure, count in ((example.rouge_l, longest), (example.word_f1, shared)):
            expected = 0.0 if count == 0 else 2 * count / (len(prediction) + len(reference))
            assert measure(prediction, reference) == pytest.approx(expected)


def _is_subsequence(items, sequence):
    iterator = iter(sequence)
    return all(any(item == other for other in iterator) for item in items)
