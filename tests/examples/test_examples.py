"""Each example's quick mode runs to the end (slow: `pytest -m slow`)."""

import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, arguments, expected",
    [
        ("quickstart.py", ["--epochs", "1", "--characters", "20000"], "reloaded model"),
        ("finetune_classifier.py", ["--quick"], "held-out accuracy"),
    ],
)
def test_example_quick_mode(script, arguments, expected):
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert expected in result.stdout
