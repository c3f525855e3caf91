import os
import subprocess
import sys

import pytest

import keras_attn


def test_public_api_is_importable():
    for name in keras_attn.__all__:
        assert getattr(keras_attn, name) is not None, name


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_import_does_not_import_tensorflow(backend):
    pytest.importorskip(backend)
    code = (
        "import sys, keras_attn, keras\n"
        f"assert keras.config.backend() == {backend!r}, keras.config.backend()\n"
        "print('tensorflow' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, KERAS_BACKEND=backend),
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "False", result.stdout
