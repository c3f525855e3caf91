"""Inference passes recorded as their torch operations and replayed as one
straight-line function: on the CPU, what a CUDA graph is on a GPU."""

import itertools
import threading

import optree

from keras_attn import keras_internals
from keras_attn.torch_runtime.cuda_graph import NotCapturable
from keras_attn.torch_runtime.graph_watch import GraphWatch
from keras_attn.torch_runtime.graph_watch import ModeScope

# Operations whose result has the input's shape, dtype and device and
# values that do not depend on the input's (`ones_like(x)`): recorded as
# the `aten.full` they equal, so that the input's computation can go.
_FILLS = {
    "ones_like": lambda args, kwargs: 1,
    "zeros_like": lambda args, kwargs: 0,
    "full_like": lambda args, kwargs: args[1] if len(args) > 1 else kwargs["fill_value"],
    "new_ones": lambda args, kwargs: 1,
    "new_zeros": lambda args, kwargs: 0,
    "new_full": lambda args, kwargs: args[2] if len(args) > 2 else kwargs["fill_value"],
}

# The products recorded as oneDNN's (`few_row_product`): at most this many
# rows, by a matrix of at least this many elements (a oneDNN call costs
# some 60 us more than `mm`'s).
FEW_ROWS = 16
FEW_ROWS_WEIGHT = 1 << 19

# Constants of at most this many elements that are not the model's
# variables are shared by value (each `torch.tensor(0)` a layer makes is
# one), so that equal computations on them are computed once.
SHARED_CONSTANT_SIZE = 64


class RecordedPass:
    """One input signature of a model's inference pass, recorded as the
    torch (aten) operations it runs and replayed by one generated Python
    function: a pass costs what its operations cost, without the Python of
    the layers that chose them.

    Recording runs `run(inputs)` once under a torch dispatch mode that
    writes down every operation, and under a `GraphWatch` that refuses a
    pass reading a tensor's value on the host (what the replay would not
    read again). The recording is then simplified without changing a
    number: an operation computed again on the same values is computed
    once, one whose result nothing uses is dropped (unless it writes in
    place or draws random numbers), and `ones_like(x)`-like operations
    become fills that do not wait for `x`. Each replay runs the same
    kernels on the same values as the eager pass, so its outputs are the
    eager pass's to the bit, except where a product of a few rows is
    recorded as oneDNN's (`few_row_product`): they then differ by float32
    rounding.

    Variables and other tensors the pass reads but does not make are read
    where they are at each replay (a weight assigned in place is seen; a
    replaced tensor is not, which `PassGraphs` checks). Outputs and their
    Keras masks are fresh tensors of each replay.

    Args:
        run: the eager pass, `run(inputs) -> outputs` (a tensor, or a list
            or dict of tensors).
        inputs: the pass's inputs, a list of tensors.
        keep_outputs: keep the recording run's outputs for `take_outputs`
            (for a run whose side effects must happen once), or on the
            `NotCapturable` raised (its `outputs`).

    Raises:
        NotCapturable: the pass reads a tensor's value on the host, writes
            in place into a tensor it did not make, or returns what is not
            a tensor (the message says which, and where).

    Example:

    ```python
    import torch
    from keras_attn.torch_runtime.recorded_pass import RecordedPass

    weight = torch.randn(4, 4)
    inputs = [torch.randn(2, 4)]
    with torch.no_grad():
        recorded = RecordedPass(lambda inputs: torch.relu(inputs[0] @ weight), inputs)
        outputs = recorded([torch.randn(2, 4)])  # what relu(x @ weight) gives
    ```
    """

    def __init__(self, run, inputs, keep_outputs=False):
        import torch

        watch = GraphWatch(lambda value: isinstance(value, torch.Tensor), reads_only=True)
        tape = _Tape(inputs, watch)
        with watch, tape:
            outputs = run(list(inputs))
        if watch.problems:
            error = NotCapturable("; ".join(watch.problems))
            # The run itself was eager and exact: its outputs, if kept.
            error.outputs = outputs if keep_outputs else None
            raise error
        leaves, self.structure = optree.tree_flatten(outputs, none_is_leaf=True)
        masks = [keras_internals.keras_mask(leaf) for leaf in leaves]
        for leaf in leaves:
            if not isinstance(leaf, torch.Tensor):
                raise NotCapturable(f"an output is {type(leaf).__name__}, not a tensor")
        self.masked = [mask is not None for mask in masks]
        self.count = len(leaves)
        self.function, self.source, self.operations = tape.function(
            leaves + [mask for mask in masks if mask is not None]
        )
        # The recording run's own outputs, for a caller that uses them as
        # the first call's (`keep_outputs`; it takes them, see `take_outputs`).
        self.outputs = outputs if keep_outputs else None

    def take_outputs(self):
        """The outputs of the recording run (`keep_outputs=True`), once."""
        outputs, self.outputs = self.outputs, None
        return outputs

    def __call__(self, inputs):
        """The pass on `inputs` (tensors of the recorded shapes, dtypes and
        devices): the outputs in the pass's structure, with their Keras
        masks."""
        flat = self.function(*inputs)
        outputs = list(flat[:self.count])
        masks = iter(flat[self.count:])
        for output, masked in zip(outputs, self.masked):
            if masked:
                keras_internals.set_keras_mask(output, next(masks))
        return self.structure.unflatten(outputs)


class _Reference:
    """A tensor of the recording: an input, a constant or what a step made."""

    __slots__ = ("name", "root", "step", "fixed")

    def __init__(self, name, root=None, step=None, fixed=False):
        self.name, self.root, self.step = name, root or self, step
        # Whether its value is the same at every pass: a tensor built from
        # numbers (not a variable), or computed from such tensors alone.
        self.fixed = fixed

    def __repr__(self):
        return self.name


class _Step:
    """One recorded operation: `func(*args, **kwargs)` with `_Reference`s for
    tensors; the references of the tensors it made (`outputs`, one per
    item where it returned a list or tuple (`container`), None for an item
    that is None); `pure`: False where it writes in place or draws random
    numbers, None once merged into an earlier step."""

    __slots__ = ("func", "args", "kwargs", "uses", "name", "outputs", "container", "pure")

    def __init__(self, func, args, kwargs, uses, name, outputs, container, pure):
        self.func, self.args, self.kwargs, self.uses = func, args, kwargs, uses
        self.name, self.outputs, self.container, self.pure = name, outputs, container, pure


class _Tape(ModeScope):
    """The torch dispatch mode that records a run (see `RecordedPass`); what
    it cannot record goes to `watch`'s problems."""

    def __init__(self, inputs, watch):
        from torch.utils._python_dispatch import TorchDispatchMode

        tape = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return tape.record(func, args, kwargs or {})

        self.mode = Mode()
        self.names = itertools.count()
        self.inputs = [_Reference(f"i{index}") for index in range(len(inputs))]
        # The reference of each tensor given or made, by id, with a weak
        # reference to the tensor: an id names it only while it lives, and
        # the recording holds no intermediate longer than the pass does.
        self.references = {}
        # The same by where each one's memory starts: a live tensor found
        # there that no operation made aliases one.
        self.storages = {}
        for value, reference in zip(inputs, self.inputs):
            self.remember(value, reference)
        self.constants = {}  # name -> tensor
        self.shared = {}  # (dtype, shape, device, bytes) -> reference
        self.written = set()  # roots written in place
        self.steps = []
        self.problem = watch.problem

    def record(self, func, args, kwargs):
        import torch

        if func is torch.ops.aten.mm.default and few_row_product(*args):
            func = few_row_product_op()
        result = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name in _FILLS and isinstance(result, torch.Tensor) and result.is_contiguous():
            # The fill the result equals, without the input it was shaped by.
            func, args, kwargs = torch.ops.aten.full.default, (
                list(result.shape), _FILLS[name](args, kwargs)
            ), dict(dtype=result.dtype, layout=result.layout, device=result.device)
        schema = func._schema
        container = isinstance(result, (list, tuple))
        leaves = list(result) if container else [result]
        args, kwargs = self.template(args), self.template(kwargs)
        arguments = _references((args, kwargs))
        if not all(leaf is None or isinstance(leaf, torch.Tensor) for leaf in leaves):
            # A number read back from a tensor the pass built from numbers
            # (Keras' `ops.full` gives torch its fill value so) is the same
            # at every pass; any other is the recording's alone.
            if not arguments or not all(reference.fixed for reference in arguments):
                self.problem(f"reads a tensor's value on the host ({func})")
            return result
        written = [
            argument.name for argument in schema.arguments
            if argument.alias_info is not None and argument.alias_info.is_write
        ]
        for argument in written:
            for reference in _references(_argument(schema, args, kwargs, argument)):
                if reference.root.name.startswith("c"):
                    self.problem(f"writes in place into a tensor it did not make ({func})")
                self.written.add(reference.root)
        pure = not written and torch.Tag.nondeterministic_seeded not in func.tags
        fixed = pure and all(reference.fixed for reference in arguments)
        step = _Step(func, args, kwargs, arguments, f"v{next(self.names)}", [], container, pure)
        aliased = self._aliased(schema, args, kwargs)
        for index, leaf in enumerate(leaves):
            if leaf is None:
                step.outputs.append(None)
                continue
            returned = 0 if len(schema.returns) == 1 else min(index, len(schema.returns) - 1)
            name = f"{step.name}[{index}]" if container else step.name
            reference = _Reference(name, aliased.get(returned), step, fixed)
            step.outputs.append(reference)
            self.remember(leaf, reference)
        self.steps.append(step)
        return result

    def _aliased(self, schema, args, kwargs):
        """`{output index: root}` of the outputs that alias an argument (views,
        in-place and `out=` results)."""
        aliased = {}
        for index, returned in enumerate(schema.returns):
            if returned.alias_info is None:
                continue
            sets = returned.alias_info.before_set
            for argument in schema.arguments:
                if argument.alias_info is not None and argument.alias_info.before_set & sets:
                    found = _references(_argument(schema, args, kwargs, argument.name))
                    if found:
                        aliased[index] = found[0].root
                    break
        return aliased

    def template(self, value):
        """`value` with each tensor replaced by its `_Reference` (a constant's
        made where the tensor is not one the run made or was given)."""
        import torch

        if isinstance(value, torch.Tensor):
            reference = _alive(self.references.get(id(value)), value)
            return reference if reference is not None else self.constant(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.template(item) for item in value)
        if isinstance(value, dict):
            return {key: self.template(item) for key, item in value.items()}
        return value

    def constant(self, value):
        """The reference of a tensor the pass reads but did not make: a
        variable, or a small tensor a layer built from numbers, shared with
        equal ones."""
        import torch

        key = None
        if (
            value.numel() <= SHARED_CONSTANT_SIZE and not isinstance(value, torch.nn.Parameter)
            and value.device.type == "cpu" and value.is_contiguous()
        ):
            # Its bytes, whatever its dtype (numpy has no bfloat16).
            key = (value.dtype, tuple(value.shape),
                   value.reshape(-1).view(torch.uint8).numpy().tobytes())
            if key in self.shared:
                return self.shared[key]
        alias = self.storages.get(_storage(value))
        if alias is not None and alias[0]() is None:
            alias = None  # that tensor is gone: its memory is another's now
        if alias is not None and not alias[1].root.name.startswith("c"):
            self.problem(
                "reads a tensor it made or was given through an alias no torch operation "
                "made (`torch.from_numpy` of its `.numpy()`)"
            )
        reference = _Reference(f"c{len(self.constants)}", fixed=not isinstance(value, torch.nn.Parameter))
        self.constants[reference.name] = value
        self.remember(value, reference)
        if key is not None:
            self.shared[key] = reference
        return reference

    def remember(self, value, reference):
        """Names the tensor `value` by `reference` from now on."""
        import weakref

        held = weakref.ref(value)
        self.references[id(value)] = (held, reference)
        if _storage(value) and self.storages.get(_storage(value), (lambda: None,))[0]() is None:
            self.storages[_storage(value)] = (held, reference)

    def function(self, outputs):
        """`(function, source, operations)`: the replay of the recording
        returning `outputs` (tensors of the run), its source and how many
        operations it runs."""
        import torch

        returned = []
        for value in outputs:
            reference = _alive(self.references.get(id(value)), value)
            if reference is None:
                reference = self.constant(value)
            returned.append(reference)
        replaced = self._merged()
        steps = self._live(replaced, returned)
        namespace = {"_clone": torch.ops.aten.clone.default}
        constants = {}
        lines = [f"def replay({', '.join(reference.name for reference in self.inputs)}):"]
        # Each intermediate is let go after its last use, as the eager pass
        # lets it go: the replay's peak memory is the pass's.
        reads = [
            {_base(replaced.get(reference, reference).name) for reference in step.uses}
            for step in steps
        ]
        last_use = {name: index for index, names in enumerate(reads) for name in names}
        kept = {_base(replaced.get(reference, reference).name) for reference in returned}
        for index, step in enumerate(steps):
            op = _global(namespace, constants, step.func)
            arguments = [_source(item, replaced, namespace, constants) for item in step.args]
            arguments += [
                f"{key}={_source(item, replaced, namespace, constants)}"
                for key, item in step.kwargs.items()
            ]
            lines.append(f"    {step.name} = {op}({', '.join(arguments)})")
            done = sorted(
                name for name in reads[index] - kept
                if name.startswith("v") and last_use[name] == index
            )
            if step.name not in last_use and step.name not in kept:
                done.append(step.name)
            if done:
                lines.append(f"    {' = '.join(done)} = None")
        results = []
        for reference in returned:
            name = replaced.get(reference, reference).name
            # A constant (or a view of one) is returned as a copy: the eager
            # pass makes it anew at each call.
            results.append(f"_clone({name})" if reference.root.name.startswith("c") else name)
        lines.append(f"    return ({''.join(result + ', ' for result in results)})")
        source = "\n".join(lines) + "\n"
        namespace.update(self.constants)
        exec(compile(source, "<keras_attn recorded pass>", "exec"), namespace)  # noqa: S102
        return namespace["replay"], source, len(steps)

    def _merged(self):
        """`{reference: earlier equal reference}` for the outputs of each pure
        step that computes what an earlier step computed: the same
        operation on the same arguments, none of which (nor either result)
        is ever written in place."""
        replaced, earlier = {}, {}
        for step in self.steps:
            if not step.pure:
                continue
            touched = [*step.uses, *filter(None, step.outputs)]
            if any(reference.root in self.written for reference in touched):
                continue
            key = (step.func, _key(step.args, replaced), _key(step.kwargs, replaced))
            found = earlier.get(key)
            if found is None:
                earlier[key] = step
            elif len(found.outputs) == len(step.outputs):
                for mine, theirs in zip(step.outputs, found.outputs):
                    if mine is not None:
                        replaced[mine] = theirs
                step.pure = None  # merged: not run
        return replaced

    def _live(self, replaced, returned):
        """The steps the replay runs, in order: those writing in place or
        drawing random numbers, and those whose results they or the outputs
        use."""
        needed = {replaced.get(reference, reference).step for reference in returned}
        live = []
        for step in reversed(self.steps):
            if step.pure is None or (step.pure and step not in needed):
                continue
            live.append(step)
            for reference in step.uses:
                needed.add(replaced.get(reference, reference).step)
        return live[::-1]


def few_row_product(left, right):
    """Whether the product `left @ right` (`aten.mm`'s operands) is recorded
    as `few_row_product_op`: float32 matrices on the CPU, at most `FEW_ROWS`
    rows on the left, at least `FEW_ROWS_WEIGHT` elements on the right,
    torch running more than one thread, and torch built with oneDNN.

    torch's `mm` spreads so few rows over threads badly; oneDNN's linear
    does better there, and worse on one thread or from a few dozen rows
    (docs/speed.md, "Products of few rows on oneDNN"). Its sums are added
    in another order, so the results differ from `mm`'s by float32
    rounding (about 1e-6 relative)."""
    import torch

    return (
        left.dim() == 2 and right.dim() == 2 and 0 < left.shape[0] <= FEW_ROWS
        and right.numel() >= FEW_ROWS_WEIGHT
        and left.dtype == right.dtype == torch.float32
        and left.device.type == right.device.type == "cpu" and _why_not_onednn() is None
    )


def _why_not_onednn():
    """Why this process records no product as oneDNN's (one torch thread,
    or torch built without oneDNN), or None where it does."""
    import torch

    if not torch.backends.mkldnn.is_available():
        return "torch is built without oneDNN"
    if torch.get_num_threads() == 1:
        return "one torch thread"
    return None


def products_described():
    """One line for the model's execution plan: which matrix products a
    recording made now runs on oneDNN (`few_row_product`), and why none do
    when none do."""
    import torch

    reason = _why_not_onednn()
    if reason is not None:
        return f"every matrix product by torch's mm ({reason})"
    return (
        f"float32 products of at most {FEW_ROWS} rows by a matrix of at least "
        f"{FEW_ROWS_WEIGHT:,} elements by oneDNN ({torch.get_num_threads()} torch threads), "
        "the others by torch's mm"
    )


_FEW_ROW_PRODUCT = []
_DEFINING = threading.Lock()


def few_row_product_op():
    """The operation `keras_attn::few_row_product(left, right)`: `left @
    right` by oneDNN's linear (`mkldnn._linear_pointwise` on `right.t()`),
    a torch custom operation so that `torch.compile` of a recording calls it
    as it is. Defined at the first call (in any thread)."""
    with _DEFINING:
        if not _FEW_ROW_PRODUCT:
            _FEW_ROW_PRODUCT.append(_define_few_row_product())
    return _FEW_ROW_PRODUCT[0]


def _define_few_row_product():
    import torch

    @torch.library.custom_op("keras_attn::few_row_product", mutates_args=())
    def product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(left, right.t(), None, "none", [], "")

    @product.register_fake
    def _(left, right):
        return left.new_empty((left.shape[0], right.shape[1]))

    return torch.ops.keras_attn.few_row_product.default


def _alive(found, value):
    """The reference of `found` (a `(weak reference, reference)` pair or None)
    if it was made for `value` itself, not for a dead tensor of the same id."""
    if found is None or found[0]() is not value:
        return None
    return found[1]


def _storage(tensor):
    """Where a tensor's memory starts (0 for a tensor without memory)."""
    return tensor.untyped_storage().data_ptr()


def _base(name):
    """The variable of the replay holding a reference's value (`v3` of
    `v3[1]`)."""
    return name.split("[", 1)[0]


def _argument(schema, args, kwargs, name):
    """The (templated) value a call gave the schema argument `name`."""
    for index, argument in enumerate(schema.arguments):
        if argument.name == name:
            if argument.kwarg_only or index >= len(args):
                return kwargs.get(name)
            return args[index]
    return None


def _references(value):
    """The `_Reference`s in a templated value, in order."""
    if isinstance(value, _Reference):
        return [value]
    if isinstance(value, (list, tuple)):
        return [reference for item in value for reference in _references(item)]
    if isinstance(value, dict):
        return [reference for item in value.values() for reference in _references(item)]
    return []


def _key(value, replaced):
    """A hashable form of a templated value, references by what they stand
    for after merging."""
    if isinstance(value, _Reference):
        return ("ref", id(replaced.get(value, value)))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(item, replaced) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((key, _key(item, replaced)) for key, item in value.items()))
    return (type(value).__name__, repr(value))


def _global(namespace, constants, value):
    """The name under which the replay's function reads `value`."""
    key = (type(value).__name__, repr(value))
    name = constants.get(key)
    if name is None:
        name = constants[key] = f"k{len(constants)}"
        namespace[name] = value
    return name


def _source(value, replaced, namespace, constants):
    """Python source for a templated argument."""
    if isinstance(value, _Reference):
        return replaced.get(value, value).name
    if isinstance(value, list):
        return "[" + ", ".join(_source(item, replaced, namespace, constants) for item in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(_source(item, replaced, namespace, constants) + ", " for item in value) + ")"
    if value is None or type(value) in (bool, int, str):
        return repr(value)
    return _global(namespace, constants, value)
