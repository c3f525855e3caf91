"""What every captured CUDA graph of the torch runtime shares: the device
check, the warm-up CUDA asks for before a capture, the capture and the
replay (`StepGraph`, `PassGraph`, `TrainGraph` build on it)."""

import contextlib

# How many runs that a graph records (a warm-up and its capture) are open.
_RECORDING = [0]


@contextlib.contextmanager
def recording():
    """Marks the runs a graph will replay (warm-up and capture), inside which
    code with a host-side fast path takes its graph-safe path
    (`keras_attn.optimizers.AdamW`)."""
    _RECORDING[0] += 1
    try:
        yield
    finally:
        _RECORDING[0] -= 1


def is_recording():
    """Whether a run that a graph records is open (`recording`)."""
    return _RECORDING[0] > 0


class CapturedGraph:
    """A `torch.cuda.CUDAGraph` recorded from one run of a function and
    replayed. Subclasses decide what to capture and which buffers a replay
    reads and writes; its four methods are CUDA itself, which
    tests/torch_runtime/emulated_cuda.py stands in for on the CPU."""

    graph = None

    @staticmethod
    def on_device(tensor):
        """Whether `tensor` is a CUDA tensor, which a graph can hold."""
        import torch

        return isinstance(tensor, torch.Tensor) and tensor.is_cuda

    def warm_up(self, run):
        """`run()` on a side stream, as CUDA requires before a capture."""
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            outputs = run()
        torch.cuda.current_stream().wait_stream(side)
        return outputs

    def capture(self, run):
        """`run()` recorded as `self.graph`; its outputs, the graph's."""
        import torch

        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            return run()

    def replay(self):
        """Runs the recorded kernels again on the captured buffers."""
        self.graph.replay()


class NotCapturable(RuntimeError):
    """A function that a CUDA graph cannot replay exactly."""
