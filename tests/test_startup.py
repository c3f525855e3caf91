"""TensorFlow's start-up lines stay out of the user's stderr on JAX and
torch, whoever imports TensorFlow after `import keras_attn`
(`keras_attn.startup.QuietTensorFlowImport`)."""

import os
import subprocess
import sys

import keras
import pytest

from keras_attn.startup import QuietTensorFlowImport

# User code after `import keras_attn`: Keras imports TensorFlow, where it is
# installed, to seed it and to save a `.keras` file. An audit hook writes a
# line of the process's own while TensorFlow is being imported: the quieting
# must give it back.
USER_CODE = """
import os
import sys

import keras_attn
import keras

def write_during_tensorflow_import(event, arguments):
    if event == "import" and arguments[0].startswith("tensorflow.") and not written:
        written.append(arguments[0])
        os.write(2, b"a line of the user's own\\n")

written = []
sys.addaudithook(write_during_tensorflow_import)
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
model.save(sys.argv[1])
print("tensorflow imported:", "tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_tensorflow_imported_by_user_code_prints_no_start_up_lines(backend, tmp_path):
    """`keras.utils.set_random_seed` and `model.save` import TensorFlow on
    every backend where it is installed; its start-up lines (oneDNN, CUDA
    drivers, CPU instructions) reached stderr after `import keras_attn`.
    Checked in this backend's own test run."""
    if keras.config.backend() != backend:
        pytest.skip(f"checked in the {backend} run")
    pytest.importorskip("tensorflow")
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    env["KERAS_BACKEND"] = backend
    result = subprocess.run(
        [sys.executable, "-c", USER_CODE, str(tmp_path / "model.keras")],
        env=env, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "tensorflow imported: True", result.stdout
    assert result.stderr == "a line of the user's own\n", result.stderr[:3000]


def test_the_hook_steps_aside_for_every_line_and_other_modules(monkeypatch):
    """`TF_CPP_MIN_LOG_LEVEL=0`, even set after `import keras_attn`, asks
    for TensorFlow's every line; modules other than TensorFlow are left to
    the other finders."""
    hook = QuietTensorFlowImport()
    assert hook.find_spec("numpy") is None
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert hook.find_spec("tensorflow") is None
