"""Whole inference passes of a `TransformerModel` replayed: as CUDA graphs on
a GPU, as recorded torch operations on the CPU (`recorded_pass`)."""

import collections
import logging
import weakref

import optree

from keras_attn import keras_internals
from keras_attn.torch_runtime.cuda_graph import CapturedGraph
from keras_attn.torch_runtime.cuda_graph import NotCapturable
from keras_attn.torch_runtime.cuda_graph import recording
from keras_attn.torch_runtime.graph_watch import GraphWatch
from keras_attn.torch_runtime import recorded_pass

logger = logging.getLogger("keras_attn")

# How many input signatures of one model keep a captured graph.
GRAPH_LIMIT = 8
# How many signatures seen once (run eagerly, not captured yet) are
# remembered: a pass that sees many shapes captures only those repeated
# within the last `SEEN_LIMIT` signatures.
SEEN_LIMIT = 64


def on_gpu(inputs):
    """Whether a pass's standardized `inputs` are all on a CUDA device (a pass
    a graph can hold); others run eagerly."""
    return bool(inputs) and all(getattr(value, "is_cuda", False) for value in inputs)


def on_cpu(inputs):
    """Whether a pass's standardized `inputs` are all CPU tensors (a pass
    `recorded_pass.RecordedPass` can hold)."""
    import torch

    return bool(inputs) and all(
        isinstance(value, torch.Tensor) and value.device.type == "cpu" for value in inputs
    )


def capturable_now():
    """Whether the pass about to run may be replayed from a graph: only with
    autograd off (`torch.no_grad()`, `torch.inference_mode()`, `predict`),
    as a graph's outputs carry no autograd history."""
    import torch

    return not torch.is_grad_enabled()


class PassGraph(CapturedGraph):
    """One input signature of a model's inference pass, captured as a CUDA
    graph (`torch.cuda.CUDAGraph`) and replayed: a pass is one graph launch.

    A graph holds addresses, so each call copies its inputs into the graph's
    input buffers (unless they are those buffers), returns copies of the
    output buffers and their Keras masks, and reads the variables where they
    were at the capture (in-place updates are seen; replaced tensors are not,
    which `PassGraphs` checks). Capturing runs `run` once on a side stream,
    then records it, both under a `GraphWatch`: tensors the pass builds from
    Python numbers become fill kernels, and host reads or copies are
    refused by file and line. Each graph keeps its own memory pool.

    Args:
        run: the eager pass, `run(inputs) -> outputs` (a tensor, or a list
            or dict of tensors).
        inputs: the pass's inputs, a list of CUDA tensors.

    Raises:
        NotCapturable: an input or output that is not a CUDA tensor, or an
            operation a graph cannot record (the message says which). The
            eager pass's own errors are raised as they are.

    Example:

    ```python
    import torch
    from keras_attn.torch_runtime.pass_graph import PassGraph

    if torch.cuda.is_available():
        weight = torch.randn(4, 4, device="cuda")
        inputs = [torch.randn(2, 4, device="cuda")]
        with torch.no_grad():
            graph = PassGraph(lambda inputs: inputs[0] @ weight, inputs)
            outputs = graph(inputs)  # what inputs[0] @ weight gives
    ```
    """

    def __init__(self, run, inputs):
        for value in inputs:
            if not self.on_device(value):
                raise NotCapturable(f"an input is {_described(value)}, not a CUDA tensor")
        self.inputs = [value.clone() for value in inputs]
        self.addresses = [_address(value) for value in self.inputs]
        watch = GraphWatch(self.on_device)
        with watch, recording():
            warm = self.warm_up(lambda: run(self.inputs))
        if watch.problems:
            raise NotCapturable("; ".join(watch.problems))
        leaves, self.structure = optree.tree_flatten(warm, none_is_leaf=True)
        for leaf in leaves:
            if not self.on_device(leaf):
                raise NotCapturable(f"an output is {_described(leaf)}, not a CUDA tensor")
        # Which outputs carry a Keras mask: every mask is recorded with the
        # outputs, as one flat list (outputs, then the masks there are).
        self.masked = [keras_internals.keras_mask(leaf) is not None for leaf in leaves]
        self.count = len(leaves)
        del leaves, warm
        try:
            with GraphWatch(self.on_device, strict=True), recording():
                self.buffers = self.capture(lambda: self._flat(run(self.inputs)))
        except NotCapturable:
            raise
        except Exception as error:  # noqa: BLE001 - any operation a graph cannot record
            raise NotCapturable(f"{type(error).__name__}: {error}") from error
        if len(self.buffers) != self.count + sum(self.masked):
            raise NotCapturable("the captured pass returned other outputs than its warm-up")

    def _flat(self, outputs):
        """The tensors a replay writes: the outputs, then their masks."""
        leaves, structure = optree.tree_flatten(outputs, none_is_leaf=True)
        if structure != self.structure:
            raise NotCapturable("the captured pass returned another structure than its warm-up")
        masks = [keras_internals.keras_mask(leaf) for leaf in leaves]
        if [mask is not None for mask in masks] != self.masked:
            raise NotCapturable("the captured pass masked other outputs than its warm-up")
        for tensor in [*leaves, *masks]:
            if tensor is not None and not self.on_device(tensor):
                raise NotCapturable(f"an output is {_described(tensor)}, not a CUDA tensor")
        return leaves + [mask for mask in masks if mask is not None]

    def __call__(self, inputs):
        """The pass on `inputs` (tensors of the captured shapes, dtypes and
        devices): the outputs in the pass's structure, with their Keras
        masks, copies of the graph's buffers."""
        for value, buffer, address in zip(inputs, self.inputs, self.addresses):
            if value is not buffer and _address(value) != address:
                buffer.copy_(value)
        self.replay()
        outputs = [buffer.clone() for buffer in self.buffers[:self.count]]
        masks = iter(self.buffers[self.count:])
        for output, masked in zip(outputs, self.masked):
            if masked:
                keras_internals.set_keras_mask(output, next(masks).clone())
        return self.structure.unflatten(outputs)


# What `PassGraphs` holds, by kind: (what is replayed, for messages).
KINDS = {"cuda": "CUDA graphs", "recorded": "recorded passes"}


class PassGraphs:
    """The captured inference passes of one model, by input signature.

    `__call__` returns what the eager pass `run` returns, to 1e-5. A
    signature (each input's shape, dtype and device; inference mode and
    autocast) runs eagerly at its first call, is captured at its second
    (`kind` `"cuda"`: a `PassGraph` on a GPU; `"recorded"`: a
    `recorded_pass.RecordedPass` on the CPU) and replayed after; at most
    `limit` signatures keep a graph,
    the least recently replayed dropped first. Before each replay the model's
    state (each variable and its tensor's identity, address and dtype; each
    layer's compute dtype, quantization mode, `trainable`, LoRA) is compared
    with the capture's; any difference drops every graph. A pass a graph
    cannot replay (`NotCapturable`) makes the model run eagerly from then on,
    with one warning on the `keras_attn` logger. See docs/torch.md.

    Args:
        limit: how many signatures keep a captured graph.
        kind: `"cuda"` or `"recorded"` (`KINDS`).

    Example:

    ```python
    import keras
    import numpy as np
    import keras_attn
    from keras_attn.torch_runtime import pass_graph
    from keras_attn.torch_runtime.direct_graph import DirectGraph

    model = keras_attn.build_transformer_model(dict(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
    ))
    if keras.config.backend() == "torch":
        import torch

        graphs, direct = pass_graph.PassGraphs(), DirectGraph(model)
        run = lambda inputs: direct(model, inputs)  # the eager pass, as the runner's
        device = "cuda" if torch.cuda.is_available() else "cpu"
        inputs = [torch.tensor([[5, 6, 7, 0]], device=device),
                  torch.zeros((1, 4), dtype=torch.int32, device=device)]
        if pass_graph.on_gpu(inputs):
            with torch.no_grad():
                for _ in range(3):  # eager, captured and replayed, replayed
                    outputs = graphs(model, run, inputs)
        print(graphs.describe())
    ```
    """

    def __init__(self, limit=GRAPH_LIMIT, kind="cuda"):
        if limit < 1:
            raise ValueError(f"PassGraphs keeps at least one graph; received limit={limit!r}.")
        if kind not in KINDS:
            raise ValueError(f"PassGraphs kind is one of {sorted(KINDS)}; received kind={kind!r}.")
        self.limit, self.kind = limit, kind
        self.graphs = collections.OrderedDict()
        self.seen = collections.OrderedDict()
        self.state = None
        self.refused = None
        self.captures = 0
        self.replays = 0

    def __call__(self, model, run, inputs):
        """`run(inputs)`'s outputs, from a replayed graph where one is
        captured for the signature of `inputs` and the model is unchanged
        since (see the class); eagerly otherwise."""
        if self.refused is not None or not capturable_now():
            return run(inputs)
        state = ModelState(model)
        if self.state is None or not self.state.matches(state):
            self.graphs.clear()
            self.seen.clear()
            self.state = state.kept()
        key = _signature(inputs)
        graph = self.graphs.get(key)
        if graph is None:
            if key not in self.seen:
                self.seen[key] = True
                if len(self.seen) > SEEN_LIMIT:
                    self.seen.popitem(last=False)
                return run(inputs)
            try:
                made = PassGraph if self.kind == "cuda" else recorded_pass.RecordedPass
                graph = made(run, inputs)
            except NotCapturable as error:
                self.refused = str(error)
                self.graphs.clear()
                logger.warning(
                    "Model %r runs its inference passes eagerly, without %s: %s.",
                    model.name, KINDS[self.kind], error,
                )
                return run(inputs)
            self.captures += 1
            self.graphs[key] = graph
            if len(self.graphs) > self.limit:
                self.graphs.popitem(last=False)
        else:
            self.graphs.move_to_end(key)
        self.replays += 1
        return graph(inputs)

    def describe(self):
        """One line for the model's execution plan: the signatures captured
        and the limit, or why this model's passes run eagerly."""
        if self.refused is not None:
            return f"inference {KINDS[self.kind]} off for this model: {self.refused}"
        return (
            f"inference {KINDS[self.kind]}: {len(self.graphs)} of at most {self.limit} input "
            f"signatures captured ({self.captures} captures, {self.replays} replays)"
        )


class ModelState:
    """What a captured pass assumed about its model (see `PassGraphs`), its
    objects held by weak references so that a dead object's reused id never
    reads as unchanged."""

    def __init__(self, model):
        variables = model.variables
        values = [variable.value for variable in variables]
        layers = [model, *keras_internals.all_layers(model)]
        self.objects = [*variables, *values]
        self.ids = [id(item) for item in self.objects]
        self.values = (
            [(value.data_ptr(), value.dtype) for value in values],
            [
                (layer.compute_dtype, layer.quantization_mode, layer.trainable,
                 getattr(layer, "lora_enabled", False))
                for layer in layers
            ],
        )
        self.references = None

    def kept(self):
        """This state, to compare later ones with: its objects held weakly."""
        self.references = [weakref.ref(item) for item in self.objects]
        self.objects = None
        return self

    def matches(self, current):
        """Whether `current` (a later `ModelState` of the same model) finds
        the model as this (`kept`) state saw it."""
        return (
            current.ids == self.ids
            and current.values == self.values
            and all(reference() is not None for reference in self.references)
        )


def _signature(inputs):
    """What a graph is captured for: each input's shape, dtype and device,
    and the `dispatch_state`."""
    return (
        tuple((tuple(value.shape), value.dtype, value.device) for value in inputs),
        *dispatch_state(),
    )


def dispatch_state():
    """What decides which operations torch runs besides the inputs:
    inference mode, and CUDA and CPU autocast with their dtypes."""
    import torch

    return (
        torch.is_inference_mode_enabled(),
        *((torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
          for device in ("cuda", "cpu")),
    )


def _address(tensor):
    """Where a tensor's values are: an input that is its buffer (a view of
    the same memory, laid out alike) is not copied."""
    return tensor.data_ptr(), tensor.stride()


def _described(value):
    if hasattr(value, "device"):
        return f"a tensor on {value.device}"
    return f"{type(value).__name__}"
