"""On JAX and torch, loading a Google (TensorFlow) checkpoint imports no
TensorFlow, and TensorFlow's start-up lines stay out of the user's stderr
whoever imports TensorFlow after `import keras_attn`
(`keras_attn.startup.QuietTensorFlowImport`)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_attn.startup import QuietTensorFlowImport
from tests.checkpoint_files import google_bert_arrays
from tests.checkpoint_files import write_tf_checkpoint

CONFIG = dict(
    vocab_size=24, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=20, hidden_act="gelu", max_position_embeddings=16, type_vocab_size=2,
)

# User code: a Google checkpoint loaded, then Keras importing TensorFlow,
# where it is installed, to seed it and to save a `.keras` file. An audit
# hook writes a line of the process's own while TensorFlow is being
# imported: the quieting must give it back.
USER_CODE = """
import os
import sys

import numpy as np

import keras_attn
import keras

config, checkpoint, word_embeddings, saved = sys.argv[1:]
model = keras_attn.build_transformer_model(config, checkpoint)
expected = np.load(word_embeddings)
assert any(np.array_equal(weight, expected) for weight in model.get_weights())
print("tensorflow imported by loading:", "tensorflow" in sys.modules)

def write_during_tensorflow_import(event, arguments):
    if event == "import" and arguments[0].startswith("tensorflow.") and not written:
        written.append(arguments[0])
        os.write(2, b"a line of the user's own\\n")

written = []
sys.addaudithook(write_during_tensorflow_import)
keras.utils.set_random_seed(1)
model.save(saved)
print("tensorflow imported:", "tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_google_checkpoint_without_tensorflow_and_tensorflow_imported_later_quietly(
    backend, tmp_path
):
    """`build_transformer_model(bert_config.json, bert_model.ckpt)` loads
    with no TensorFlow import (its reader imported TensorFlow, unquieted);
    then `keras.utils.set_random_seed` and `model.save`, which import
    TensorFlow on every backend where it is installed, print none of its
    start-up lines (oneDNN, CUDA drivers, CPU instructions), which reached
    stderr after `import keras_attn`. Checked in this backend's own run."""
    if keras.config.backend() != backend:
        pytest.skip(f"checked in the {backend} run")
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    arrays = google_bert_arrays(CONFIG)
    checkpoint = write_tf_checkpoint(str(tmp_path / "bert_model.ckpt"), arrays)
    np.save(tmp_path / "word_embeddings.npy", arrays["bert/embeddings/word_embeddings"])
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    env["KERAS_BACKEND"] = backend
    result = subprocess.run(
        [sys.executable, "-c", USER_CODE, str(config), checkpoint,
         str(tmp_path / "word_embeddings.npy"), str(tmp_path / "model.keras")],
        env=env, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-2:] == [
        "tensorflow imported by loading: False", "tensorflow imported: True",
    ], result.stdout
    assert result.stderr == "a line of the user's own\n", result.stderr[:3000]


def test_the_hook_steps_aside_for_every_line_and_other_modules(monkeypatch):
    """`TF_CPP_MIN_LOG_LEVEL=0`, even set after `import keras_attn`, asks
    for TensorFlow's every line; modules other than TensorFlow are left to
    the other finders."""
    hook = QuietTensorFlowImport()
    assert hook.find_spec("numpy") is None
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert hook.find_spec("tensorflow") is None
