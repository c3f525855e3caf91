"""Each example's quick mode runs to the end (slow: `pytest -m slow`)."""

import json
import os
import subprocess
import sys

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
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *arguments],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_quickstart():
    assert "reloaded model" in run("quickstart.py", "--epochs", "1", "--characters", "20000")


@pytest.mark.slow
def test_finetune_classifier_quick_mode(tmp_path):
    assert "held-out accuracy" in run("finetune_classifier.py", "--quick", "--output", str(tmp_path))
    assert (tmp_path / "finetune_classifier.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("script, name", RESEARCH_EXAMPLES)
def test_research_example_quick_mode(script, name, tmp_path):
    run(script, "--quick", "--output", str(tmp_path))
    with open(tmp_path / f"{name}.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    assert (tmp_path / f"{name}.png").stat().st_size > 0
