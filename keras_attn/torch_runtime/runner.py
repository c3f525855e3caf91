"""How a `TransformerModel` runs on torch: the one place that chooses the
path of a call, and remembers which path it took and why."""

from typing import NamedTuple

import keras

from keras_attn import keras_internals
from keras_attn.torch_runtime import pass_graph
from keras_attn.torch_runtime import settings
from keras_attn.torch_runtime import train_graph
from keras_attn.torch_runtime.direct_graph import DirectGraph


class Path(NamedTuple):
    """The way one call ran: `name` (one of `PATHS`) and `reason`, why that
    path and not a faster one (empty for the fastest the call can take)."""

    name: str
    reason: str = ""


# Every path of a torch pass, fastest last.
PATHS = {
    "keras": "Keras' `Functional.call`: every layer through `Layer.__call__`",
    "direct": "`DirectGraph`: each layer computed by its `call`",
    "compiled blocks": "`DirectGraph`, each block structure compiled once by `torch.compile`",
    "recorded pass": "the torch operations of one pass, recorded and replayed as one "
    "straight-line function (on the CPU)",
    "cuda graph": "one captured CUDA graph of the whole pass, replayed",
}


class TorchRunner:
    """Runs one `TransformerModel`'s passes and training steps on torch.

    `call` picks the path of each eager pass (`PATHS`; the table is in
    docs/torch.md): Keras' own pass, `DirectGraph`, its blocks compiled
    (`CompiledBlocks`), a replayed CUDA graph on a GPU or the replayed
    operations of a recorded pass on the CPU (`pass_graph.PassGraphs`);
    `train_step` runs Keras' step or its captured graph
    (`train_graph.TrainGraphs`). `last` holds the path each kind of call
    (`"inference"`, `"training"`) took last, for `keras_attn.explain`. The
    switches are read at every call (`settings.current`)."""

    def __init__(self):
        self.direct_graph = None
        self.pass_graphs = pass_graph.PassGraphs()
        self.recorded_passes = pass_graph.PassGraphs(kind="recorded")
        self.train_graphs = train_graph.TrainGraphs()
        self.last = {}

    def call(self, model, inputs, training, mask, kwargs, keras_call):
        """`model.call(inputs, training, mask, **kwargs)` by the path
        `choose` picks; `keras_call()` is Keras' own `Functional.call`. Not
        while `torch.compile` traces the call (Keras' whole-step compile):
        the model calls Keras' pass itself there."""
        now = settings.current()
        path = self.keras_reason(inputs, mask, kwargs, now)
        if path is not None:
            self.last["training" if training else "inference"] = path
            return keras_call()
        flat = keras_internals.standardized_inputs(model, inputs)
        path = self.choose(model, flat, training, now)
        self.last["training" if training else "inference"] = path
        if self.direct_graph is None:
            self.direct_graph = DirectGraph(model)
        blocks = model._blocks_template() if compiles_blocks(model, now) else None

        def run(values):
            return self.direct_graph(model, values, training, blocks_template=blocks)

        if path.name == "cuda graph":
            return self.pass_graphs(model, run, flat)
        if path.name == "recorded pass":
            return self.recorded_passes(model, run, flat)
        return run(flat)

    @staticmethod
    def keras_reason(inputs, mask, kwargs, now):
        """The `Path` of a call that Keras' own pass must run, or None."""
        if any(isinstance(value, keras.KerasTensor) for value in keras.tree.flatten(inputs)):
            return Path("keras", "symbolic inputs: the call builds a graph")
        if any(value is not None for value in keras.tree.flatten(mask)) or kwargs:
            return Path("keras", "called with a Keras mask or extra arguments, which "
                        "`Functional.call` handles")
        if not now.direct_pass:
            return Path("keras", "KERAS_ATTN_DIRECT_PASS is off")
        return None

    @staticmethod
    def choose(model, flat, training, now):
        """The `Path` of an eager torch pass of `model` on its standardized
        inputs `flat`, once Keras' pass is ruled out (see `TorchRunner`)."""
        if (
            not training and now.cuda_graphs and pass_graph.on_gpu(flat)
            and pass_graph.capturable_now()
        ):
            return Path("cuda graph")
        graph_reason = _graph_reason(training, flat, now)
        if compiles_blocks(model, now):
            return Path("compiled blocks", graph_reason)
        if (
            not training and now.recorded_passes and pass_graph.on_cpu(flat)
            and pass_graph.capturable_now()
        ):
            return Path("recorded pass")
        return Path("direct", f"{_blocks_reason(model, now)}; {_recorded_reason(training, flat, now)}")

    def train_step(self, model, data, step):
        """Keras' torch `train_step(data)` (`step`), replayed as a captured
        CUDA graph on a GPU with `KERAS_ATTN_TORCH_CUDA_GRAPHS` on (a host
        batch moved to the GPU first, `train_graph.to_device`)."""
        if settings.current().cuda_graphs:
            device = train_graph.graph_device(model)
            if device is not None:
                data = train_graph.to_device(data, device)
            if train_graph.on_gpu(data):
                return self.train_graphs(model, data, step)
        return step(data)


def compiles_blocks(model, now=None):
    """Whether `model` compiles its blocks on torch: `jit_compile=True`,
    `KERAS_ATTN_COMPILE_BLOCKS` on, its blocks known, and not in a stateless
    or symbolic scope."""
    now = now or settings.current()
    return (
        keras.config.backend() == "torch"
        and keras_internals.jit_compile_requested(model)
        and now.compile_blocks
        and not keras_internals.in_stateless_or_symbolic_scope()
        and model._blocks_template() is not None
    )


def _graph_reason(training, flat, now):
    """Why a pass is not replayed as a CUDA graph (the path after it)."""
    if training:
        return "a training pass (its graph is the whole training step's, on a GPU)"
    if not now.cuda_graphs:
        return "KERAS_ATTN_TORCH_CUDA_GRAPHS is off"
    if not pass_graph.on_gpu(flat):
        return "inputs not on a GPU: CUDA graphs need one"
    return "autograd is on: a graph's outputs carry no gradient (use torch.no_grad() or predict)"


def _recorded_reason(training, flat, now):
    """Why a direct pass is not replayed (a recorded pass on the CPU, a CUDA
    graph on a GPU)."""
    if pass_graph.on_cpu(flat):
        if training:
            return "a training pass (only inference passes are recorded)"
        if not now.recorded_passes:
            return "KERAS_ATTN_RECORDED_PASSES is off"
        return ("autograd is on: a recorded pass's outputs carry no gradient (use "
                "torch.no_grad() or predict)")
    return _graph_reason(training, flat, now)


def _blocks_reason(model, now):
    """Why a direct pass does not compile its blocks."""
    if not keras_internals.jit_compile_requested(model):
        return "blocks not compiled: compile(jit_compile=True) compiles them"
    if not now.compile_blocks:
        return "blocks not compiled: KERAS_ATTN_COMPILE_BLOCKS is off"
    if model._blocks_template() is None:
        return "blocks not compiled: the model's blocks are unknown (not built by the builder)"
    return "blocks not compiled inside a stateless or symbolic scope"
