"""What a CUDA graph cannot replay, watched while a graph is recorded.

`GraphWatch` is a torch function mode over the warm-up and the capture of a
`CapturedGraph` (`PassGraph`, `TrainGraph`): it turns tensors built from
Python numbers into fill kernels on the device (a graph records the numbers
with them; a host-to-device copy could not be recorded) and names, by file
and line, what a replay would get wrong: reading a tensor on the host,
copying between host and device, drawing from an explicit
`torch.Generator`."""

import os
import sys

from keras_attn.torch_runtime.cuda_graph import NotCapturable


class ModeScope:
    """A context manager that enters and leaves its torch mode, `self.mode`
    (`GraphWatch`'s function mode, a recording's dispatch mode)."""

    mode = None

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


class GraphWatch(ModeScope):
    """A torch function mode over a run that a CUDA graph records: records
    what the graph cannot replay (`problems`, each with its place in the
    run), and makes tensors built from Python numbers with `torch.full`.

    Args:
        on_device: whether a tensor is on the graph's device.
        strict: raise `NotCapturable` at the first problem instead of
            recording it.
        reads_only: watch for host reads alone (a recording on the CPU,
            `recorded_pass`, where copies and tensors made from numbers are
            operations like any other): no fill kernels, no copy checks.
    """

    def __init__(self, on_device, strict=False, reads_only=False):
        from torch.overrides import TorchFunctionMode

        watch = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return watch.handle(func, args, kwargs or {})

        self.mode = Mode()
        self.on_device, self.strict, self.reads_only = on_device, strict, reads_only
        self.problems = []

    def handle(self, func, args, kwargs):
        import torch

        name = getattr(func, "__name__", "")
        if not self.reads_only and func in _makers() and args and not isinstance(args[0], torch.Tensor):
            dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
            device = kwargs.get("device", args[2] if len(args) > 2 else None)
            made = _filled(args[0], dtype, device, kwargs.get("requires_grad", False))
            if made is not None:
                return made
            self.problem(f"builds a tensor from host data ({type(args[0]).__name__})")
        elif name in _HOST_READS and args and self.on_device(args[0]):
            self.problem(f"reads a tensor's value on the host (Tensor.{name})")
        elif (
            not self.reads_only and name in ("cpu", "to", "cuda", "copy_") and args
            and isinstance(args[0], torch.Tensor)
        ):
            self._check_copy(name, args, kwargs)
        alpha = kwargs.get("alpha")
        if isinstance(alpha, torch.Tensor) and self.on_device(alpha):
            # torch takes `alpha` as a Python number: a tensor is read on the
            # host inside the call (Keras' torch SGD passes its learning rate
            # so), which invalidates a capture without a Python-level read.
            self.problem(f"reads a tensor's value on the host (a tensor as {name}'s alpha)")
        if kwargs.get("generator") is not None and not self.reads_only:
            self.problem(
                "draws random numbers from an explicit torch.Generator (a seeded "
                "keras.random.SeedGenerator, such as Dropout(seed=...)): a replay "
                "would repeat one draw"
            )
        return func(*args, **kwargs)

    def problem(self, what):
        problem = f"{what} at {_where()}"
        if self.strict:
            raise NotCapturable(problem)
        if problem not in self.problems:
            self.problems.append(problem)

    def _check_copy(self, name, args, kwargs):
        import torch

        tensor = args[0]
        if name == "copy_":
            source = args[1] if len(args) > 1 else kwargs.get("src")
            if self.on_device(tensor) and isinstance(source, torch.Tensor) and not self.on_device(source):
                self.problem("copies a host tensor to the device (Tensor.copy_)")
            return
        if name == "cuda":
            if not self.on_device(tensor):
                self.problem("copies a host tensor to the device (Tensor.cuda)")
            return
        targets = [*args[1:], kwargs.get("device")]
        devices = [
            torch.device(target) for target in targets
            if isinstance(target, (str, torch.device))
        ]
        to_host = name == "cpu" or any(device.type == "cpu" for device in devices)
        to_device = any(device.type != "cpu" for device in devices)
        if self.on_device(tensor) and to_host and tensor.device.type != "cpu":
            self.problem(f"copies a device tensor to the host (Tensor.{name})")
        elif self.on_device(tensor) and to_host and name == "cpu":
            # The CPU emulation's device is the CPU: `.cpu()` is still where
            # a real device would wait for the GPU.
            self.problem("copies a device tensor to the host (Tensor.cpu)")
        elif not self.on_device(tensor) and to_device:
            self.problem(f"copies a host tensor to the device (Tensor.{name})")


def _is_number(value):
    return isinstance(value, (bool, int, float, complex))


def _makers():
    """The torch functions that build a tensor from data."""
    import torch

    return (torch.tensor, torch.as_tensor, torch.asarray)


# The most numbers `GraphWatch` writes as fill kernels for one tensor (a
# shape, a few constants); larger host data is a copy a graph cannot hold.
MAX_FILLED = 64


def _filled(data, dtype, device, requires_grad):
    """`torch.as_tensor(data, dtype, device)` for Python numbers (or a
    small nested list or array of them) made by fill kernels on the device,
    which a graph records with the numbers; None for other data."""
    import numpy as np
    import torch

    if not _is_number(data):
        try:
            array = np.asarray(data)
        except (TypeError, ValueError):
            return None
        if array.dtype.kind not in "biufc" or array.size > MAX_FILLED:
            return None
    host = torch.as_tensor(data, dtype=dtype)
    numbers = host.reshape(-1).tolist()
    if not numbers:
        made = torch.empty(host.shape, dtype=host.dtype, device=device)
    else:
        made = torch.stack(
            [torch.full((), number, dtype=host.dtype, device=device) for number in numbers]
        ).reshape(host.shape)
    return made.requires_grad_(requires_grad) if requires_grad else made


# The tensor methods that give a tensor's value to Python (a device sync).
_HOST_READS = frozenset(
    ["item", "tolist", "numpy", "__array__", "__bool__", "__int__", "__float__", "__index__",
     "__complex__"]
)

# Frames skipped when naming where a run does something: torch's own and
# the torch runtime's.
_SKIPPED = (
    os.sep + os.path.join("site-packages", "torch") + os.sep,
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
)


def _where():
    """`file:line (function)` of the innermost frame outside torch, this module
    and Keras' backend (the optimizer, layer or loss that asked), with the
    innermost frame outside torch after "via" when they differ."""
    frame = sys._getframe(2)
    innermost = caller = None
    while frame is not None and caller is None:
        filename = frame.f_code.co_filename
        if not any(part in filename for part in _SKIPPED):
            innermost = innermost or frame
            if not any(part in filename for part in _LOW_LEVEL):
                caller = frame
        frame = frame.f_back
    if innermost is None:
        return "?"
    if caller is None or caller is innermost:
        return _frame_name(innermost)
    return f"{_frame_name(caller)} via {_frame_name(innermost)}"


# Keras' own helpers, below the code that decides what a step does.
_LOW_LEVEL = tuple(
    os.sep + os.path.join("keras", "src", part) + os.sep for part in ("backend", "ops", "random", "utils")
)


def _frame_name(frame):
    return f"{_short(frame.f_code.co_filename)}:{frame.f_lineno} ({frame.f_code.co_name})"


def _short(filename):
    for marker in ("site-packages" + os.sep, os.sep + "keras_attn" + os.sep):
        if marker in filename:
            tail = filename.rsplit(marker, 1)[1]
            return tail if marker.startswith("site") else "keras_attn" + os.sep + tail
    return filename
