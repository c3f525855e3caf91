"""The conditional-LayerNorm example's quick mode runs to the end and the
condition helps (slow: `pytest -m slow`)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.mark.slow
def test_conditional_layer_norm_quick_mode(tmp_path):
    # The checkout's keras_attn, whichever one is installed.
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT))
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "bert4keras", "conditional_layer_norm.py"),
         "--quick", "--output", str(tmp_path)],
        capture_output=True, text=True, timeout=900, env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "conditional_layer_norm.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    assert results["held_out_nll_true_condition"] < results["held_out_nll_untrained"]
    # The model uses its condition: the true package predicts better.
    assert results["held_out_nll_true_condition"] < results["held_out_nll_shuffled_condition"]
