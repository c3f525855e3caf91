"""A decoding step compiled from its recorded torch operations rather than
from its Python (`KERAS_ATTN_RECORDED_STEPS`)."""

import logging

import optree

from keras_attn.torch_runtime import pass_graph
from keras_attn.torch_runtime.cuda_graph import NotCapturable
from keras_attn.torch_runtime.recorded_pass import RecordedPass


class RecordedStep:
    """`torch.compile(step)` for a step that is one graph, reached without
    dynamo tracing the step's Python: each signature's first call records
    the torch operations the step runs (`RecordedPass`: the first call is
    that eager run), and `torch.compile` compiles the recording's replay at
    the second, a straight line of operations, which dynamo traces in a
    fraction of the time the layers' Python takes.

    A signature is what dynamo would specialise the step to: autocast and
    inference mode (`pass_graph.dispatch_state`), the shapes, dtypes and
    devices of its tensor arguments (tuples and named tuples opened), the values of its numbers, strings and None, a bound method's
    function and its object's class and `get_config()` (a sampler's
    `next_tokens`; the object's identity where it has no configuration), and
    the identity of any other argument (the model's `CachedForward`). The
    recording reads the variables where they are at each call, as the
    compiled step does; the generator makes a new step when the model's
    variables change (`generator.model_state`), and `new_run` drops the
    recordings when a layer's dtype policy, quantization, `trainable` or
    LoRA changed. What dynamo guards beyond that, a Python attribute a
    layer reads during the step, is not checked: as for CUDA graphs and
    recorded passes, a layer attribute changed after the first call is not
    seen.

    On the CPU only: a step on a GPU is compiled from its Python.

    A step the recording refuses (a value read on the host, a write into a
    tensor the step did not make, see `RecordedPass`) is compiled from its
    Python as before, with one log line saying why, from its next call on
    (the refused recording run's outputs are that call's); so are its later
    signatures.

    Args:
        step: the step, `step(*args) -> outputs` (tensors in tuples).
        compile_python: the step's `torch.compile` (`CompiledStep.compiled`),
            used where the recording is refused.
    """

    def __init__(self, step, compile_python):
        self.step = step
        self.compile_python = compile_python
        self.compiled = {}  # signature -> (RecordedPass, compiled replay, objects)
        self.refused = None  # why the recording was refused, once it was
        self.state = None  # the model as the recordings found it

    def new_run(self, model):
        """Before a `generate` call of `model`: the recordings are dropped if
        the model changed since they were made in a way its variables'
        identity does not show (a layer's dtype policy, quantization mode,
        `trainable`, LoRA, a variable's tensor; `pass_graph.ModelState`)."""
        state = pass_graph.ModelState(model)
        if self.state is not None and not self.state.matches(state):
            self.compiled = {}
        self.state = state.kept()

    def __call__(self, *args):
        if self.refused is not None:
            return self.compile_python(*args)
        import torch

        leaves, structure = optree.tree_flatten(args, none_is_leaf=True)
        where = [index for index, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        tensors = [leaves[index] for index in where]
        if any(tensor.device.type != "cpu" for tensor in tensors):
            # On a GPU the step is compiled from its Python, as it was
            # measured there (tensors a layer builds from numbers are the
            # graph's own constants, not host copies at each step).
            return self.compile_python(*args)
        signatures = [pass_graph.dispatch_state(), *map(_signature, leaves)]
        found = self.compiled.get((structure, *signatures))
        if found is None:
            return self._record(leaves, structure, where, tensors, signatures)
        recorded, replay, _ = found
        return recorded.structure.unflatten(list(replay(*tensors)[: recorded.count]))

    def _record(self, leaves, structure, where, tensors, signatures):
        """Runs the step once under the recorder and returns its outputs: this
        call is the recording run, so its writes happen once."""
        import torch

        def run(values):
            filled = list(leaves)
            for index, value in zip(where, values):
                filled[index] = value
            return self.step(*structure.unflatten(filled))

        try:
            with torch.no_grad():
                recorded = RecordedPass(run, tensors, keep_outputs=True)
        except NotCapturable as error:
            self.refused = str(error)
            logging.getLogger("keras_attn").warning(
                "keras_attn: the decoding step cannot be compiled from its recorded "
                "operations (%s); torch.compile traces its Python instead (same results, "
                "a longer first call).", self.refused,
            )
            return error.outputs
        # The objects the signature names by identity are held, so that no
        # other object takes one of their ids.
        objects = [
            leaf for leaf, signature in zip(leaves, signatures[1:]) if signature[0] != "tensor"
        ]
        self.compiled[(structure, *signatures)] = (
            recorded, torch.compile(recorded.function, dynamic=False), objects
        )
        return recorded.take_outputs()


def _signature(leaf):
    """What a compiled step is specialised to in one argument."""
    import torch

    if isinstance(leaf, torch.Tensor):
        return ("tensor", tuple(leaf.shape), leaf.dtype, leaf.device, leaf.requires_grad)
    if leaf is None or isinstance(leaf, (bool, int, float, str)):
        return (type(leaf).__name__, leaf)
    if hasattr(leaf, "__self__") and hasattr(leaf, "__func__"):
        # A bound method (a sampler's `next_tokens`) is a new object at each
        # lookup, and samplers are made for each call: its function, and its
        # object's class and configuration, as the generator keys its loops.
        owner = leaf.__self__
        if hasattr(owner, "get_config"):
            config = tuple(sorted((key, repr(value)) for key, value in owner.get_config().items()))
            return ("method", leaf.__func__, type(owner), config)
        return ("method", leaf.__func__, id(owner))
    return ("object", id(leaf))
