"""Training steps of a `TransformerModel` replayed as CUDA graphs."""

import logging

import optree

from keras_attn import keras_internals
from keras_attn.torch_runtime.cuda_graph import CapturedGraph
from keras_attn.torch_runtime.cuda_graph import NotCapturable
from keras_attn.torch_runtime.cuda_graph import recording
from keras_attn.torch_runtime.graph_watch import GraphWatch

LOGGER = logging.getLogger("keras_attn")

# Batch signatures captured per model at most (a full batch and an epoch's
# last, partial one); any other signature runs eagerly.
MAX_SIGNATURES = 2


def on_gpu(data):
    """Whether a training step's `data` (Keras' `(x, y, sample_weight)`)
    holds CUDA tensors (a step to capture)."""
    return any(getattr(value, "is_cuda", False) for value in optree.tree_leaves(data))


def graph_device(model):
    """The CUDA device `model`'s variables are on, or None (no graph). Read
    off the first of the torch parameters Keras registers for them (a walk
    of `model.variables` costs about a millisecond a step)."""
    first = next(iter(model.parameters()), None)
    return first.device if first is not None and first.is_cuda else None


def to_device(data, device):
    """`data` with its NumPy arrays and its torch tensors on other devices
    moved to `device`, dtypes kept; its other leaves as they are. Keras'
    torch `fit` and `train_on_batch` give the step host batches, which the
    model's layers would move to the device one by one inside the step (a
    copy a CUDA graph cannot record); moved before the step, the values the
    step computes with are the same."""
    import numpy as np
    import torch

    def moved(leaf):
        if isinstance(leaf, np.ndarray):
            return torch.as_tensor(leaf, device=device)
        if isinstance(leaf, torch.Tensor) and leaf.device != device:
            return leaf.to(device)
        return leaf

    leaves, structure = _flatten(data)
    return structure.unflatten([moved(leaf) for leaf in leaves])


class TrainGraph(CapturedGraph):
    """One batch signature of Keras' torch `train_step` (forward, loss,
    backward, `optimizer.apply`, metrics) captured as one CUDA graph and
    replayed: a training step is a copy of the batch and one launch.

    The batch's tensors are copied into the graph's buffers (its other
    leaves are constants of the graph); the logs are returned as copies; the
    model's, optimizer's and metrics' variables are read and written in
    place (a step that gives a variable a new tensor is refused). Python
    numbers the step makes into tensors become fill kernels (`GraphWatch`);
    their values are constants of the graph. Refused, with the place in the
    step: reading a tensor on the host (`.item()`, `ops.cond`), drawing from
    an explicit `torch.Generator` (a seeded `Dropout`), building a tensor from
    host data, host/device copies. Unseeded dropout draws new masks at every
    replay.

    `capture_step` runs the step once on a side stream (its logs are that
    step's), then records it; a step refused after that has run once,
    correctly.

    Args:
        data: the batch of the step to capture, `(x, y, sample_weight)`;
            every tensor in it must be on the device.

    Raises:
        NotCapturable: a tensor of `data` is not on the device.
    """

    def __init__(self, data):
        leaves, self.structure = _flatten(data)
        for leaf in leaves:
            if _is_array(leaf) and not self.on_device(leaf):
                raise NotCapturable(
                    f"a batch tensor is {type(leaf).__name__} on {getattr(leaf, 'device', '?')}, "
                    "not a CUDA tensor"
                )
        self.inputs = [leaf.clone() if _is_array(leaf) else leaf for leaf in leaves]
        self.addresses = [_address(buffer) if _is_array(buffer) else None for buffer in self.inputs]
        self.data = self.structure.unflatten(self.inputs)
        self.refusal = None
        self.state = []

    def capture_step(self, step, model):
        """Runs `step(data)` once (the warm-up) and records it; returns the
        warm-up's logs. Afterwards `refusal` is None if captured, else why not;
        `state` holds the variables the step reads and writes."""
        self.state = step_state(model)
        optimizer = model.optimizer
        values = [id(variable.value) for variable in self.state]
        constants = python_constants(optimizer)
        watch = GraphWatch(self.on_device)
        with watch, recording():
            logs = self.warm_up(lambda: step(self.data))
        problems = list(watch.problems)
        for variable, value in zip(self.state, values):
            if id(variable.value) != value:
                problems.append(
                    f"the step gave `{variable.path}` a new tensor instead of writing into its own"
                )
                break
        if [id(variable) for variable in step_state(model)] != [id(v) for v in self.state]:
            problems.append("the step added or removed variables")
        changed = _changed(constants, python_constants(optimizer))
        if changed:
            problems.append(f"the step changes the optimizer's Python attribute `{changed}`")
        if problems:
            self.refusal = "; ".join(problems)
            return logs
        watch = GraphWatch(self.on_device, strict=True)
        try:
            with watch, recording():
                self.outputs = self.capture(lambda: step(self.data))
        except Exception as error:  # noqa: BLE001 - any operation a graph cannot record
            self.refusal = str(error) if isinstance(error, NotCapturable) else (
                f"capturing failed: {type(error).__name__}: {error}"
            )
            return logs
        self.outputs_leaves, self.outputs_structure = _flatten(self.outputs)
        return logs

    def __call__(self, data):
        """The captured step on `data` (a batch of the captured signature):
        the new weights written in place, the logs returned as copies."""
        leaves = _flatten(data)[0]
        for leaf, buffer, address in zip(leaves, self.inputs, self.addresses):
            if address is not None and leaf is not buffer and _address(leaf) != address:
                buffer.copy_(leaf)
        self.replay()
        outputs = [
            output.clone() if _is_array(output) else output for output in self.outputs_leaves
        ]
        return self.outputs_structure.unflatten(outputs)


class TrainGraphs:
    """The captured training steps of one model, by batch signature.

    Called by the torch runner as Keras' `train_step` on a GPU (`step` is
    Keras' own eager step). A signature (the batch's structure, shapes,
    dtypes, devices and other leaves) runs eagerly at its first step, is
    captured at its second (`TrainGraph`) and replayed from its third; at most
    `limit` signatures are captured. Before each step `state_key` is compared
    with the capture's, and any difference (LoRA, a frozen layer, a
    recompile, a changed hyperparameter) drops every graph; weights written in
    place need no new capture. A step that cannot be captured runs eagerly,
    with one warning on the `keras_attn` logger; `describe` says why.

    Args:
        limit: how many batch signatures are captured at most.
    """

    graph_class = TrainGraph

    def __init__(self, limit=MAX_SIGNATURES):
        self.limit = limit
        self.key = None
        self.graphs = {}
        self.seen = set()
        self.refused = {}
        self.warned = False
        self.eager_steps = self.captures = self.replays = 0

    def __call__(self, model, data, step):
        import torch

        if torch.compiler.is_compiling():
            return step(data)
        key = state_key(model)
        if key != self.key:
            self.forget()
            self.key = key
        signature = _signature(data)
        graph = self.graphs.get(signature)
        if graph is not None:
            self.replays += 1
            return graph(data)
        if signature not in self.seen or signature in self.refused:
            self.seen.add(signature)
            return self._eager(model, data, step)
        if len(self.graphs) >= self.limit:
            self._refuse(signature, f"{self.limit} batch signatures are captured already")
            return self._eager(model, data, step)
        try:
            graph = self.graph_class(data)
        except NotCapturable as error:
            self._refuse(signature, str(error))
            return self._eager(model, data, step)
        logs = graph.capture_step(step, model)
        if graph.refusal is not None:
            self._refuse(signature, graph.refusal)
            self.eager_steps += 1
            # Its run may have made state (a cache the optimizer fills at
            # its first update): the refusal holds for the model as it is.
            self.key = state_key(model)
        else:
            self.graphs[signature] = graph
            self.captures += 1
        return logs

    def forget(self):
        """Drops every graph and refusal: the next step at each signature
        is a first step."""
        self.graphs.clear()
        self.seen.clear()
        self.refused.clear()

    def describe(self):
        """One line: how training steps ran and why."""
        parts = []
        if self.graphs:
            parts.append(
                f"training steps replayed as CUDA graphs at {len(self.graphs)} batch "
                f"signature(s) ({self.captures} captured, {self.replays} replays)"
            )
        for reason in dict.fromkeys(self.refused.values()):
            parts.append(f"eager at a batch signature: {reason}")
        if not parts:
            return (
                "training steps eager so far (a batch signature's second step is captured "
                "as a CUDA graph)"
            )
        return "; ".join(parts)

    def _eager(self, model, data, step):
        self.eager_steps += 1
        logs = step(data)
        # The first step builds the optimizer's slots: the graphs compare
        # against the model as the step left it.
        self.key = state_key(model)
        return logs

    def _refuse(self, signature, reason):
        self.refused[signature] = reason
        if not self.warned:
            self.warned = True
            LOGGER.warning(
                "keras_attn: a training step on torch runs eagerly, not as a CUDA graph: %s",
                reason,
            )


def step_state(model):
    """The variables a training step of `model` reads and writes: the
    model's (with its seed generators' states), its optimizer's and its
    metrics', each once."""
    optimizer = model.optimizer
    variables = {}
    for variable in [
        *model.variables,
        *(optimizer.variables if optimizer is not None else ()),
        *model.metrics_variables,
    ]:
        variables.setdefault(id(variable), variable)
    return list(variables.values())


def state_key(model):
    """What a captured step of `model` depends on besides its variables'
    values: the optimizer and its Python numbers, the loss, the dtype
    policies, each variable's tensor and trainability. Equal keys: a graph
    captured under one replays under the other."""
    optimizer = model.optimizer
    policies = tuple(
        layer.dtype_policy.name for layer in [model, *keras_internals.all_layers(model)]
    )
    # Keras registers each variable's tensor as a parameter of its layer's
    # torch module: a walk of the modules is some 20 times cheaper than
    # reading `variable.value` for each.
    parameters = tuple((id(tensor), tensor.requires_grad) for tensor in model.parameters())
    others = tuple(
        map(id, [*(optimizer.variables if optimizer is not None else ()), *model.metrics_variables])
    )
    return (
        id(optimizer), python_constants(optimizer), id(getattr(model, "loss", None)), policies,
        parameters, others,
    )


def python_constants(optimizer):
    """The optimizer's attributes as a graph sees them: Python numbers,
    strings and None by value (a graph holds them as constants), other
    objects by identity (a learning-rate schedule, a variable)."""
    if optimizer is None:
        return None
    return tuple(
        (name, value if _is_constant(value) else id(value))
        for name, value in sorted(vars(optimizer).items())
    )


def _changed(before, after):
    """The first attribute whose constant differs between two
    `python_constants`."""
    if before == after:
        return None
    before, after = dict(before or ()), dict(after or ())
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            return name
    return None


def _is_constant(value):
    return value is None or isinstance(value, (bool, int, float, str))


def _flatten(tree):
    """`(leaves, structure)` of a batch or of the logs, None a leaf."""
    return optree.tree_flatten(tree, none_is_leaf=True)


def _signature(data):
    """What a captured step holds fixed about its batch: the structure,
    each tensor's shape, dtype and device, the other leaves themselves."""
    leaves, structure = _flatten(data)
    return structure, tuple(
        (tuple(leaf.shape), leaf.dtype, leaf.device) if _is_array(leaf) else _hashable(leaf)
        for leaf in leaves
    )


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return id(value)
    return value


def _is_array(value):
    import torch

    return isinstance(value, torch.Tensor)


def _address(tensor):
    """Where a tensor's values are: a buffer passed back is not copied."""
    return tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride())
