"""The serving tests run the engine's torch programs eagerly: each engine
would otherwise compile each of its programs (`KERAS_ATTN_TORCH_COMPILE=1`
is the suite's default), for seconds each. One test in test_engine.py
turns compiling on for itself."""

import pytest


@pytest.fixture(scope="module", autouse=True)
def eager_engine_programs():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
        yield
