"""torch's decoding step compiled by `torch.compile` and, on a GPU,
replayed as CUDA graphs (`step_graph.StepGraph`)."""

import logging
import time
import types

import keras

from keras_attn import keras_internals
from keras_attn import progress
from keras_attn.torch_runtime import compile_cache
from keras_attn.torch_runtime import recorded_step
from keras_attn.torch_runtime import step_graph
from keras_attn.torch_runtime import settings


class CompiledStep:
    """`decoding_step` compiled by `torch.compile` (inductor), for one model's
    generator; a drop-in for `decoding_step`.

    The step (the model's forward pass for one token, the cache writes, the
    head and, for a sampler, its `next_tokens` as `pick`) is one graph with
    static shapes, compiled once per shape (batch or beams, cache capacity,
    buffer length), never per step. Each `CompiledStep` compiles its own
    code object, so models do not share dynamo's recompile limit. When a
    shape compiles is `mode` (`torch_compile_mode`). On a GPU (unless
    `graphs=False`) a compiled shape is replayed as a CUDA graph from its
    second step in each `generate` call (`step_graph.StepGraph`). `step` may
    be a function, a closure or a bound method (the serving engine's
    programs, which write its cache pools in place and take no graphs). With
    `KERAS_ATTN_RECORDED_STEPS` on (and `recorded`), `torch.compile` compiles
    the step's recorded operations (`recorded_step.RecordedStep`), from a
    shape's second call (`calls_to_compile`). Caches go to
    `compile_cache.ensure`'s folder. If compiling fails, the reason is logged
    once and the step runs eagerly from then on (the same numbers). See
    docs/generation.md and docs/torch.md."""

    def __init__(self, step, mode="always", graphs=True, recorded=True):
        import torch

        self.step = step
        compile_cache.ensure()
        self.compiled = torch.compile(_own_code(step), dynamic=False)
        # How many calls of a new shape compile it (under `"always"`): a
        # recorded step records at the first and compiles at the second.
        self.calls_to_compile = 1
        if recorded and settings.current().recorded_steps:
            # Compiled from its recorded operations, not its Python.
            self.compiled = recorded_step.RecordedStep(step, self.compiled)
            self.calls_to_compile = 2
        self.failure = None
        self.mode = mode
        self.uses_graphs = graphs
        # Per shape: the seconds its eager steps took so far, and the shapes
        # compiled (`mode="auto"`).
        self.eager_seconds = {}
        self.compiled_shapes = set()
        # On a GPU, per shape in this `generate` call: its `StepGraph`, or
        # None after its first, ungraphed step; and why graphs are off for
        # this model, if a capture failed.
        self.graphs = {}
        self.no_graphs = None

    def new_run(self, model=None):
        """Forgets the CUDA graphs of the previous `generate` call: a graph
        replays the model as it was at its capture (see `StepGraph`); a
        recorded step checks `model` likewise (`RecordedStep.new_run`)."""
        self.graphs = {}
        if model is not None and isinstance(self.compiled, recorded_step.RecordedStep):
            self.compiled.new_run(model)

    def __call__(self, *args):
        # The same guards in every thread (`settle_thread_state`): one compile.
        keras_internals.settle_thread_state()
        on_gpu = step_graph.on_gpu(args[1])
        graphs = (self.uses_graphs and self.no_graphs is None and on_gpu
                  and settings.current().cuda_graphs)
        shape = _step_shape(args) if self.mode == "auto" or graphs else None
        if self.failure is None and self._compiles(shape, on_gpu):
            try:
                if graphs:
                    return self._graphed(shape, args)
                return self.compiled(*args)
            except Exception as error:  # noqa: BLE001 - any compiler failure
                if not _is_compile_failure(error):
                    raise
                first_line = (str(error).splitlines() or ["(no message)"])[0]
                self.failure = f"{type(error).__name__}: {first_line}"
                logging.getLogger("keras_attn").warning(
                    "keras_attn: torch.compile failed for the decoding step (%s); "
                    "decoding eagerly instead (same results, slower).",
                    self.failure,
                )
        if self.mode != "auto":
            return self.step(*args)
        started = time.perf_counter()
        outputs = self.step(*args)
        self.eager_seconds[shape] = self.eager_seconds.get(shape, 0.0) + (
            time.perf_counter() - started
        )
        return outputs

    def _graphed(self, shape, args):
        """The compiled step on `args`, replayed as a CUDA graph (`StepGraph`) from
        the second step of its shape in a `generate` call; a step a graph cannot
        replay runs without one from then on, with a warning."""
        if shape not in self.graphs:
            self.graphs[shape] = None
            return self.compiled(*args)
        try:
            if self.graphs[shape] is None:
                self.graphs[shape] = step_graph.StepGraph(self.compiled, args)
            return self.graphs[shape](*args)
        except step_graph.NotCapturable as error:
            self.no_graphs, self.graphs = str(error), {}
            logging.getLogger("keras_attn").warning(
                "keras_attn: the compiled decoding step cannot run as a CUDA graph (%s); "
                "launching its kernels one by one instead (same results, slower).",
                self.no_graphs,
            )
            return self.compiled(*args)

    def _compiles(self, shape, on_gpu):
        """Whether a step of `shape` runs compiled: always (`"always"`), or
        (`"auto"`) once its shape's eager steps have taken
        `COMPILE_AFTER_EAGER_SECONDS` in all."""
        if self.mode != "auto":
            return True
        if shape in self.compiled_shapes:
            return True
        spent = self.eager_seconds.get(shape, 0.0)
        if spent < COMPILE_AFTER_EAGER_SECONDS["gpu" if on_gpu else "cpu"]:
            return False
        self.compiled_shapes.add(shape)
        progress.say(
            f"compiling the decoding step for this shape (torch.compile, "
            f"once per shape): its eager steps have taken {spent:.1f} s, about what "
            "compiling costs; KERAS_ATTN_TORCH_COMPILE=1 compiles at once, 0 never."
        )
        return True


def _own_code(step):
    """`step` (a function or bound method) with a copy of its code object,
    so that dynamo's caches and recompile limit are this copy's own."""
    function = getattr(step, "__func__", step)
    own = types.FunctionType(
        function.__code__.replace(), function.__globals__, function.__name__,
        function.__defaults__, function.__closure__,
    )
    own.__kwdefaults__ = function.__kwdefaults__
    if hasattr(step, "__self__"):
        return types.MethodType(own, step.__self__)
    return own


# About what compiling one shape of the decoding step costs, by where the
# step runs (docs/speed.md; on a GPU inductor builds CUDA kernels). With
# `KERAS_ATTN_TORCH_COMPILE` unset, a shape compiles once its eager steps
# have taken this long (the ski-rental rule: never more than twice the time
# of the better choice made in hindsight).
COMPILE_AFTER_EAGER_SECONDS = {"cpu": 10.0, "gpu": 25.0}


def _step_shape(args):
    """What a compiled step's graph is specialised to: the shapes of the
    tensors among the step's arguments (the cache's included)."""
    return tuple(
        tuple(value.shape) for value in step_graph.flatten(args[1:])[0] if hasattr(value, "shape")
    )


def _is_compile_failure(error):
    """Whether `error` comes from torch's compiler stack (dynamo, inductor,
    the C++ toolchain) rather than from the step itself."""
    import torch

    compiler_errors = (torch._dynamo.exc.TorchDynamoException,)
    if isinstance(error, compiler_errors):
        return True
    module = type(error).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor", "torch._subclasses"))


def torch_compile_mode():
    """How torch decoding steps are compiled, from `KERAS_ATTN_TORCH_COMPILE`:
    `"always"` (on: each shape at its first step), `"never"` (off), or
    `"auto"` (unset or `auto`: each shape once its eager steps have taken
    `COMPILE_AFTER_EAGER_SECONDS`, about what compiling costs). None off
    torch."""
    if keras.config.backend() != "torch":
        return None
    return settings.current().torch_compile


def torch_compiles_steps():
    """Whether torch decoding steps may be compiled: on the torch backend,
    unless `KERAS_ATTN_TORCH_COMPILE=0`."""
    return torch_compile_mode() not in (None, "never")
