"""The bert4keras ALBERT example's quick mode runs to the end (slow:
`pytest -m slow`)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.mark.slow
def test_albert_classification_quick_mode(tmp_path):
    script = os.path.join(ROOT, "examples", "bert4keras", "albert_classification.py")
    # The example imports this checkout's keras_attn, not an installed one.
    environment = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT))
    result = subprocess.run(
        [sys.executable, script, "--quick", "--output", str(tmp_path)],
        capture_output=True, text=True, timeout=900, env=environment,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "albert_classification.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    # Shared blocks and factorised embeddings: far fewer parameters.
    assert results["albert"]["encoder_parameters"] < 0.6 * results["bert"]["encoder_parameters"]
    for name in ("albert", "bert"):
        assert 0.0 <= results[name]["held_out_accuracy"] <= 1.0
