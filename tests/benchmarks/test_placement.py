"""benchmarks/placement.py: every contender on the backend's device, and a
run that would mix devices refused (GPU runs once left transformers on the
CPU beside Keras on the GPU)."""

import os
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCHMARKS))

import placement  # noqa: E402

torch = pytest.importorskip("torch")


def test_mixed_placements_are_refused_naming_every_contender():
    with pytest.raises(placement.MixedDevicesError) as error:
        placement.check_placements(
            {"keras_attn": "NVIDIA H100 80GB HBM3", "transformers (eager)": "cpu"}
        )
    message = str(error.value)
    assert "keras_attn on 'NVIDIA H100 80GB HBM3'" in message
    assert "transformers (eager) on 'cpu'" in message


@pytest.mark.parametrize("device", ["cpu", "NVIDIA H100 80GB HBM3"])
def test_one_device_for_every_contender_passes(device):
    placements = {"keras_attn": device, "keras-hub": device, "transformers (eager)": device}
    assert placement.check_placements(placements) == placements


def test_torch_peers_follow_keras_onto_the_gpu_or_refuse(monkeypatch):
    """Keras on a GPU: the torch peer goes to CUDA, or, where torch sees no
    GPU, the run is refused rather than timing transformers on the CPU."""
    monkeypatch.setattr(placement, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert placement.torch_device() == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(placement.MixedDevicesError, match="torch sees no GPU"):
        placement.torch_device()
    monkeypatch.setattr(placement, "device_name", lambda: "cpu")
    assert placement.torch_device() == torch.device("cpu")


def test_this_machine_places_keras_and_torch_alike():
    """On the machine running the tests (a CPU, or a GPU both see), the
    real devices agree."""
    keras_side = placement.device_name()
    torch_side = placement.torch_device_name(placement.torch_device())
    assert placement.device_kind(keras_side) == placement.device_kind(torch_side)


def test_the_transformers_contender_asks_where_to_run(monkeypatch):
    """bert_base's transformers contender is placed by `torch_device`: a
    refusal there stops it before any model is built."""
    import bert_base

    def refuse():
        raise placement.MixedDevicesError("refused")

    monkeypatch.setattr(placement, "torch_device", refuse)
    with pytest.raises(placement.MixedDevicesError, match="refused"):
        bert_base.transformers_eager()
