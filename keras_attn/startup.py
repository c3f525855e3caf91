"""What `import keras_attn` does before anything else: imports Keras with a
clear error when its backend is not installed, and keeps TensorFlow's
start-up log lines out of the user's output.

This module imports no Keras at the top: `keras_attn/__init__.py` calls
`import_keras` first, and the examples call `quiet_tensorflow` around the
calls that load TensorFlow (`keras.utils.set_random_seed` does on every
backend where TensorFlow is installed).
"""

import contextlib
import importlib.util
import json
import os
import re
import sys
import tempfile

# The backends keras_attn runs on, by the module Keras imports for each.
BACKEND_MODULES = ("tensorflow", "jax", "torch")

# TensorFlow's start-up lines, written by its C++ libraries while they load,
# before they read `TF_CPP_MIN_LOG_LEVEL`: absl's INFO and WARNING lines
# (oneDNN, CUDA drivers, TensorRT, CPU instructions), absl's notice that
# logging is not initialised yet, and the line that continues the CPU one.
TENSORFLOW_START_UP_LINE = re.compile(
    r"^(?:[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|To enable the following instructions: )"
)

# `TF_CPP_MIN_LOG_LEVEL` as the user set it (None: not set), read before
# `quiet_tensorflow` sets it.
USER_TF_LOG_LEVEL = os.environ.get("TF_CPP_MIN_LOG_LEVEL")


def import_keras():
    """Imports Keras (quietly, see `quiet_tensorflow`) and returns it.

    Raises:
        ImportError: Keras' backend is not installed. The message names the
            backend, where that choice came from (`KERAS_BACKEND`, a
            `keras.json`, or Keras' default), the backends that are
            installed and the extra to install.
    """
    try:
        with quiet_tensorflow():
            import keras
    except ModuleNotFoundError as error:
        if error.name not in BACKEND_MODULES:
            raise
        raise ImportError(missing_backend_message(error.name)) from None
    return keras


def missing_backend_message(module):
    """Why Keras' backend `module` cannot load, and the two ways out."""
    backend, source = _configured_backend()
    installed = [name for name in BACKEND_MODULES if _installed(name)]
    choices = (
        "choose an installed one with "
        + " or ".join(f"KERAS_BACKEND={name}" for name in installed)
        if installed
        else "no backend is installed"
    )
    return (
        f"keras_attn needs Keras' backend '{backend}' ({source}), but its package "
        f"'{module}' is not installed: {choices}, or install it with "
        f'pip install "keras_attn[{backend}]". Backends keras_attn runs on: '
        f"{', '.join(BACKEND_MODULES)}."
    )


def _configured_backend():
    """`(backend, where the choice came from)`, as Keras decides it:
    `KERAS_BACKEND`, else the `backend` of `$KERAS_HOME/keras.json` (default
    `~/.keras/keras.json`), else TensorFlow."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"], "set by KERAS_BACKEND"
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    path = os.path.join(home, "keras.json")
    with contextlib.suppress(OSError, ValueError, AttributeError):
        with open(path, encoding="utf-8") as file:
            backend = json.load(file).get("backend")
        if backend and backend != "tensorflow":
            return backend, f"set in {path}"
    return "tensorflow", "Keras' default when KERAS_BACKEND is not set"


def _installed(module):
    with contextlib.suppress(ImportError, ValueError):
        return importlib.util.find_spec(module) is not None
    return False


@contextlib.contextmanager
def quiet_tensorflow():
    """Runs its body with TensorFlow's start-up lines kept out of stderr.

    Once TensorFlow is imported there is nothing left to hide, and with
    `TF_CPP_MIN_LOG_LEVEL=0` (every line, as TensorFlow means it) nothing
    is hidden. Otherwise, where it is not set, it sets
    `TF_CPP_MIN_LOG_LEVEL=3`, so TensorFlow's
    later C++ log lines are left out too (XLA's "compiled cluster", its
    "failed call to cuInit" on a machine without a GPU; TensorFlow's errors
    still reach the user as Python exceptions), and captures the process's stderr while its body runs
    (file descriptor 2, where C++ libraries write) to write it back without
    the lines `TENSORFLOW_START_UP_LINE` matches."""
    if "tensorflow" in sys.modules or USER_TF_LOG_LEVEL == "0":
        yield
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 to capture
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            kept = [
                line
                for line in text.splitlines(keepends=True)
                if not TENSORFLOW_START_UP_LINE.match(line)
            ]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
