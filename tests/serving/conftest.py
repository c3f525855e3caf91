import pytest


@pytest.fixture(autouse=True)
def eager_torch_steps(monkeypatch):
    """The engine's torch step runs eagerly in these tests (the suite's
    default compiles every torch step at once, tests/conftest.py): the
    eager step is the reference, and one test compiles it
    (`test_the_compiled_torch_step_gives_the_eager_tokens`)."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
