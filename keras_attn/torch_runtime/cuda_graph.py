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
        """`run()` recorded as `self.graph`; its outputs, the graph's. A
        capture that fails leaves the device's random number generator as
        it found it (`_generator_kept`)."""
        import torch

        self.graph = torch.cuda.CUDAGraph()
        with _generator_kept(), torch.cuda.graph(self.graph):
            return run()

    def replay(self):
        """Runs the recorded kernels again on the captured buffers."""
        self.graph.replay()


class NotCapturable(RuntimeError):
    """A function that a CUDA graph cannot replay exactly."""


@contextlib.contextmanager
def _generator_kept():
    """Puts back the current CUDA device's default generator state if the
    block fails. A capture marks that state as recording and unmarks it when
    the capture ends; a capture that CUDA ends with an error (a run that
    invalidated it) skips the unmarking, and every later dropout outside a
    graph fails ("Offset increment outside graph capture"), which would turn
    a refused capture into a broken model."""
    import torch

    generator = torch.cuda.default_generators[torch.cuda.current_device()]
    saved = generator.clone_state() if hasattr(generator, "clone_state") else None
    try:
        yield
    except BaseException:
        if saved is not None:
            generator.graphsafe_set_state(saved)
        raise
