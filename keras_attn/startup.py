"""What `import keras_attn` does first: imports Keras with a clear error
when its backend is not installed, and keeps TensorFlow's start-up log
lines out of the user's output, also when TensorFlow is imported later by
other code (`QuietTensorFlowImport`). Imports no Keras at the top."""

import contextlib
import importlib.abc
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
    QuietTensorFlowImport.install()
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
        f"pip install {module} (in a keras_attn clone: "
        f'pip install -e ".[{backend}]" -c constraints.txt). Backends keras_attn runs on: '
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


def _wants_every_line():
    """`TF_CPP_MIN_LOG_LEVEL=0`, set by the user before or after
    `import keras_attn`: TensorFlow's every line, as TensorFlow means it."""
    return USER_TF_LOG_LEVEL == "0" or os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0"


@contextlib.contextmanager
def quiet_tensorflow():
    """Runs its body with TensorFlow's start-up lines kept out of stderr: unless
    TensorFlow is imported or `TF_CPP_MIN_LOG_LEVEL=0`, sets
    `TF_CPP_MIN_LOG_LEVEL=3` where unset and writes the body's stderr (file
    descriptor 2) back without the lines `TENSORFLOW_START_UP_LINE` matches.
    TensorFlow's errors still reach the user as Python exceptions."""
    if "tensorflow" in sys.modules or _wants_every_line():
        yield
        return
    with _without_start_up_lines():
        yield


# Whether `_without_start_up_lines` is capturing: a nested use (TensorFlow
# imported while Keras is) leaves the capture to the outer one.
_capturing = False


@contextlib.contextmanager
def _without_start_up_lines():
    global _capturing
    if _capturing:
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
        _capturing = True
        try:
            yield
        finally:
            _capturing = False
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


class QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """An import hook (a `sys.meta_path` finder) under which TensorFlow's
    import, by whichever code, runs inside `quiet_tensorflow`. It wraps the
    loader the later finders return (`_QuietLoader`), imports nothing itself,
    and removes itself once TensorFlow is imported."""

    @classmethod
    def install(cls):
        """Puts the hook first in `sys.meta_path`, unless TensorFlow is
        already imported, the user asked for every line, or it is there."""
        if "tensorflow" in sys.modules or _wants_every_line():
            return
        if not any(isinstance(finder, cls) for finder in sys.meta_path):
            sys.meta_path.insert(0, cls())

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" or _wants_every_line():
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _QuietLoader(spec.loader, self)
        return spec


class _QuietLoader(importlib.abc.Loader):
    """Runs TensorFlow's `exec_module` without its start-up lines; every
    other attribute is the wrapped loader's."""

    def __init__(self, loader, finder):
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        if _wants_every_line():
            self._loader.exec_module(module)
            return
        with _without_start_up_lines():
            self._loader.exec_module(module)
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self._finder)
