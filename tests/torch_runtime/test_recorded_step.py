"""torch: a decoding step compiled from its recorded operations
(`RecordedStep`, `KERAS_ATTN_RECORDED_STEPS`): each signature recorded once,
the recording run's writes done once, a refused recording compiled from
the step's Python. Generation through it is tested with the compiled step's
own tests (tests/torch_runtime/test_compiled_step.py, both kinds)."""

import logging

import keras
import pytest

from keras_attn.torch_runtime import recorded_step

pytestmark = pytest.mark.skipif(keras.config.backend() != "torch", reason="torch's")


@pytest.fixture
def replays_uncompiled(monkeypatch):
    """`torch.compile` of the recordings left out: these tests check what
    is recorded and when; the compiled replays are the generation tests'."""
    import torch

    compiled = []

    def compile_stub(function, **options):
        compiled.append(function)
        return function

    monkeypatch.setattr(torch, "compile", compile_stub)
    return compiled


def test_each_signature_is_recorded_once_and_its_first_call_writes_once(replays_uncompiled):
    import torch

    calls = []

    def step(cache, token, scale):
        calls.append(scale)
        cache.add_(token)  # a cache written in place, as the decoding step's is
        return (cache * scale).sum(dim=1), cache

    recorded = recorded_step.RecordedStep(step, compile_python=None)
    cache = torch.zeros(2, 3)
    total, returned = recorded(cache, torch.ones(2, 3), 2)
    # The first call is the recording run itself: one write, not two.
    assert torch.equal(cache, torch.ones(2, 3)) and returned is cache
    assert torch.equal(total, torch.full((2,), 6.0))
    total, _ = recorded(cache, torch.ones(2, 3), 2)
    assert torch.equal(cache, torch.full((2, 3), 2.0))
    assert torch.equal(total, torch.full((2,), 12.0))
    assert calls == [2] and len(replays_uncompiled) == 1  # replayed, not run
    # A number is part of the signature (dynamo specialises on it too), as
    # is a shape: each records once more.
    total, _ = recorded(cache, torch.ones(2, 3), 3)
    assert torch.equal(total, torch.full((2,), 27.0))
    recorded(torch.zeros(4, 3), torch.ones(4, 3), 3)
    recorded(torch.zeros(4, 3), torch.ones(4, 3), 3)
    assert calls == [2, 3, 3] and len(replays_uncompiled) == 3
    # So is autocast, which changes the operations recorded.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        total, _ = recorded(torch.zeros(4, 3), torch.ones(4, 3), 3)
    assert calls == [2, 3, 3, 3] and len(replays_uncompiled) == 4


def test_a_sampler_made_for_each_call_is_one_signature(replays_uncompiled):
    """Samplers are made per `generate` call: one class and configuration is
    one signature; another configuration records again."""
    import torch

    class Scaled:
        def __init__(self, factor):
            self.factor = factor

        def get_config(self):
            return {"factor": self.factor}

        def pick(self, x):
            return x * self.factor

    def step(x, pick):
        return (pick(x),)

    recorded = recorded_step.RecordedStep(step, compile_python=None)
    x = torch.ones(3)
    assert torch.equal(recorded(x, Scaled(2.0).pick)[0], torch.full((3,), 2.0))
    assert torch.equal(recorded(x, Scaled(2.0).pick)[0], torch.full((3,), 2.0))
    assert len(replays_uncompiled) == 1
    assert torch.equal(recorded(x, Scaled(5.0).pick)[0], torch.full((3,), 5.0))
    assert len(replays_uncompiled) == 2


def test_a_refused_recording_compiles_the_python_once_said(replays_uncompiled, caplog):
    import torch

    def step(x):
        return (x * float(x.sum()),)  # a value read on the host

    through_python = []

    def compile_python(*args):
        through_python.append(args)
        return step(*args)

    recorded = recorded_step.RecordedStep(step, compile_python)
    x = torch.ones(2)
    with caplog.at_level(logging.WARNING, logger="keras_attn"):
        for _ in range(3):
            assert torch.equal(recorded(x)[0], torch.full((2,), 2.0))
    # The first call was the refused recording's own (eager, exact) run.
    assert len(through_python) == 2 and not replays_uncompiled
    warnings = [r.getMessage() for r in caplog.records if "recorded operations" in r.getMessage()]
    assert len(warnings) == 1 and "on the host" in warnings[0]


def test_a_model_changed_between_calls_is_recorded_again(replays_uncompiled):
    """`new_run` (each `generate` call) keeps the recordings of an unchanged
    model and drops them when a layer changed in a way the model's
    variables do not show (here `trainable`; `pass_graph.ModelState`)."""
    import torch

    model = keras.Sequential([keras.layers.Dense(2)])
    model.build((None, 3))

    def step(x):
        return (model.layers[0](x),)

    recorded = recorded_step.RecordedStep(step, compile_python=None)
    x = torch.ones(1, 3)
    for _ in range(2):
        recorded.new_run(model)
        recorded(x)
        recorded(x)
    assert len(replays_uncompiled) == 1
    model.layers[0].trainable = False
    recorded.new_run(model)
    recorded(x)
    assert len(replays_uncompiled) == 2
