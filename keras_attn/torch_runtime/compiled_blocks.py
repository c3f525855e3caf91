"""The Transformer blocks of a functional model's graph, compiled once per
block structure by `torch.compile` (regional compilation)."""

import itertools
import linecache
import math
import warnings

import keras

from keras_attn import keras_internals
from keras_attn.torch_runtime import compile_cache
from keras_attn.torch_runtime import direct_call


# The `torch.compile` backend of the blocks' programs, read when a model
# first compiles them: inductor (fused kernels); "eager" runs dynamo's
# graphs without inductor (the tests check what dynamo captures with it).
COMPILE_BACKEND = "inductor"

# Numbers the programs' sources in `linecache`, each under a name of its own.
_SOURCES = itertools.count()


class CompiledBlocks:
    """The nodes of each Transformer block of a `TransformerModel`'s graph, run
    as one `torch.compile`d function per block structure (regional
    compilation): BERT-base's 12 blocks compile once, and compiling does not
    grow with depth.

    The template's blocks (`keras_attn.Transformer.blocks`) mark out regions
    of the graph: a block's layers and the `keras.ops` nodes only it
    consumes. Blocks with the same program (layer classes, wiring, constant
    arguments) share one compiled function whose code is the program written
    out (`_source`); the layers are its arguments and their weights graph
    inputs. Inside a region each layer runs by its `call`, with Keras masks as
    `direct_call.call_directly` handles them; the rest of the graph runs as
    `DirectGraph` runs it. A block runs eagerly, with one warning naming the
    layer, where a layer's `__call__` would do more than `call` (mixed
    policy, rematerialisation, activity regularizer, torch hooks) or is
    quantized, under an autocast scope or a distribution, or given a floating
    input of another dtype. Outputs, masks and gradients are the eager
    pass's, to float rounding; a configuration changed after compiling (LoRA)
    compiles again. Used under `compile(jit_compile=True)` unless
    `KERAS_ATTN_COMPILE_BLOCKS=0` (see docs/torch.md).

    Args:
        model: a `keras_attn.TransformerModel`.
        template: the `keras_attn.Transformer` whose blocks are the model's
            (its template, or for a model of `with_outputs` its base model's).
        steps: the model's `keras_internals.functional_steps`.

    Example:

    ```python
    import keras
    import keras_attn

    model = keras_attn.build_transformer_model(dict(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
    ))
    model.compile(jit_compile=True)  # on torch: each block's program compiled once
    ```
    """

    def __init__(self, model, template, steps):
        self.model_name = model.name
        self.warned = set()
        output_keys = {id(tensor) for tensor in keras.tree.flatten(model.output)}
        regions = _block_regions(template, steps, output_keys)
        # The order to run the steps in: each region in one piece (the
        # `keras.ops` nodes it took over run there too).
        self.schedule = _schedule(regions, steps, [id(tensor) for tensor in model.inputs])
        if self.schedule is None:
            warnings.warn(
                f"jit_compile: the blocks of model {model.name!r} are interleaved with "
                "other layers; they run eagerly."
            )
            self.schedule, regions = list(range(len(steps))), []
        self.functions = {}
        blocked = []
        for region in regions:
            blocker = _static_blocker(region.operations)
            if blocker is not None:
                region.program = None
                blocked.append(blocker)
            elif region.program is not None:
                body, region.constants = _source(region)
                key = (body, region.constants)
                try:
                    hash(key)
                except TypeError:  # an unhashable constant: compared by identity
                    key = (body, tuple(map(id, region.constants)))
                if key not in self.functions:
                    self.functions[key] = _compiled_program(len(self.functions), body)
                region.function = self.functions[key]
        if blocked:
            layer, reason = blocked[0]
            warnings.warn(
                f"jit_compile: {len(blocked)} of the {len(regions)} blocks of model "
                f"{model.name!r} run eagerly; layer {layer.name!r}: {reason}."
            )

    def run(self, region, values, training):
        """Runs `region` compiled on the computed `values` (by `KerasTensor`
        id), adding its outputs; False, with nothing computed, where the
        block must run eagerly."""
        if region.program is None:
            return False
        reason = _eager_reason(region, values)
        if reason is not None:
            if reason not in self.warned:
                self.warned.add(reason)
                warnings.warn(
                    f"jit_compile: a block of model {self.model_name!r} runs eagerly: {reason}."
                )
            return False
        inputs = [values[key] for key in region.input_keys]
        # The same guards in every thread (`settle_thread_state`): one compile.
        keras_internals.settle_thread_state()
        outputs = region.function(region.operations, inputs, training, region.constants)
        count = len(region.output_keys)
        for key, value, mask in zip(region.output_keys, outputs[:count], outputs[count:]):
            if mask is not None and keras_internals.keras_mask(value) is None:
                keras_internals.set_keras_mask(value, mask)
            values[key] = value
        return True


class _Region:
    """One block's steps: `steps` (indices into the model's steps), the
    `operations` they call, `parameters` (`direct_call`'s signature record
    of each layer, None for a `keras.ops` node), the `compute_dtypes` of
    its layers (sorted), the `program`, and the
    `KerasTensor` ids of its `input_keys` and of the `output_keys` used
    after it."""

    def __init__(self, steps, all_steps, used_after):
        self.steps = steps
        self.operations = tuple(all_steps[index][0] for index in steps)
        self.parameters = tuple(
            direct_call.layer_parameters(operation)
            if isinstance(operation, keras.layers.Layer) else None
            for operation in self.operations
        )
        self.compute_dtypes = sorted({
            operation.compute_dtype for operation in self.operations
            if isinstance(operation, keras.layers.Layer)
        })
        place = {}
        self.input_keys = []
        produced = {id(output) for index in steps for output in all_steps[index][3]}
        for index in steps:
            _, args, kwargs, _ = all_steps[index]
            for value in keras.tree.flatten((args, kwargs)):
                if isinstance(value, keras.KerasTensor) and id(value) not in place:
                    if id(value) not in produced:
                        place[id(value)] = len(place)
                        self.input_keys.append(id(value))
        self.output_keys = [
            id(output) for index in steps for output in all_steps[index][3]
            if id(output) in used_after
        ]
        try:
            self.program = _program(steps, all_steps, place, self.output_keys)
        except TypeError:
            self.program = None  # an argument that is not a constant: run eagerly


def _program(steps, all_steps, place, output_keys):
    """A region's program: per step `(position, args, kwargs, outputs
    count)`, the arguments as `_spec`s, and the places of its outputs.
    `place` holds the places of the region's inputs; the steps' outputs
    are added. A `TypeError` for an argument that is not a constant."""
    program_steps = []
    for position, index in enumerate(steps):
        _, args, kwargs, outputs = all_steps[index]
        program_steps.append((position, _spec(args, place), _spec(kwargs, place), len(outputs)))
        for output in outputs:
            place[id(output)] = len(place)
    program = (tuple(program_steps), tuple(place[key] for key in output_keys))
    hash(program)
    return program


def _block_regions(template, steps, output_keys):
    """The template's blocks (an encoder-decoder's encoder blocks too) as
    `_Region`s, in the order of their first steps.

    A block's region holds the steps of its layers (the k-th call of a
    layer shared by several blocks, ALBERT's, belongs to the k-th of them)
    and the `keras.ops` nodes whose outputs only it consumes."""
    blocks_of = {}
    blocks = [*getattr(template, "encoder_blocks", ()), *getattr(template, "blocks", ())]
    for number, block in enumerate(blocks):
        for layer in block.layers:
            blocks_of.setdefault(id(layer), []).append(number)
    region_of = [None] * len(steps)
    calls = {}
    for index, (operation, *_) in enumerate(steps):
        owners = blocks_of.get(id(operation)) if isinstance(operation, keras.layers.Layer) else None
        if owners:
            call = calls.get(id(operation), 0)
            calls[id(operation)] = call + 1
            region_of[index] = owners[min(call, len(owners) - 1)]
    consumers = {}
    for index, (_, args, kwargs, _) in enumerate(steps):
        for value in keras.tree.flatten((args, kwargs)):
            if isinstance(value, keras.KerasTensor):
                consumers.setdefault(id(value), []).append(index)
    for index in reversed(range(len(steps))):
        operation, _, _, outputs = steps[index]
        if isinstance(operation, keras.layers.Layer):
            continue
        users = {region_of[user] for output in outputs for user in consumers.get(id(output), [])}
        if len(users) == 1 and None not in users:
            region_of[index] = users.pop()
    members = {}
    for index, region in enumerate(region_of):
        if region is not None:
            members.setdefault(region, []).append(index)
    regions = []
    for region, indices in members.items():
        used_after = {
            id(value) for index in range(len(steps)) if region_of[index] != region
            for value in keras.tree.flatten(steps[index][1:3])
            if isinstance(value, keras.KerasTensor)
        }
        regions.append(_Region(indices, steps, used_after | output_keys))
    return regions


def _schedule(regions, steps, input_keys):
    """The order to run `steps` in: step indices, and each region in one
    piece as soon as its inputs are computed (a pre-LN block's first norm
    comes before the attention mask its attention reads); None where some
    step outside a region would need a region's output first."""
    in_region = {index: region for region in regions for index in region.steps}
    producer = {}
    for region in regions:
        for key in region.output_keys:
            producer[key] = region
    computed = set(input_keys)
    started, schedule = [], []

    def run_ready():
        for region in list(started):
            if all(key in computed for key in region.input_keys):
                started.remove(region)
                schedule.append(region)
                computed.update(region.output_keys)

    for index, (_, args, kwargs, outputs) in enumerate(steps):
        region = in_region.get(index)
        if region is not None:
            if region not in started and region not in schedule:
                started.append(region)
        else:
            needed = [
                id(value) for value in keras.tree.flatten((args, kwargs))
                if isinstance(value, keras.KerasTensor)
            ]
            if any(key in producer and key not in computed for key in needed):
                return None
            schedule.append(index)
            computed.update(id(output) for output in outputs)
        run_ready()
    return None if started else schedule


def _spec(structure, place):
    """`structure` (a node's args or kwargs) as hashable data: each
    `KerasTensor` as `("value", its place)`, containers by kind, other
    values as constants (a `TypeError` from `hash` for one that is not)."""
    if isinstance(structure, keras.KerasTensor):
        return ("value", place[id(structure)])
    if type(structure) in (list, tuple):
        kind = "list" if type(structure) is list else "tuple"
        return (kind, tuple(_spec(item, place) for item in structure))
    if type(structure) is dict:
        return ("dict", tuple((name, _spec(item, place)) for name, item in structure.items()))
    if keras.tree.is_nested(structure):
        raise TypeError("another container")
    hash(structure)
    return ("constant", structure)


def _source(region):
    """`(body, constants)`: the source of a function `(operations, inputs,
    training, constants)` that runs `region`'s program and returns its
    outputs, then their Keras masks; what `_compiled_program` compiles. The
    program and layer parameters are written into the code, which dynamo
    does not guard; constants other than None, `bool`, `int`, finite `float`
    and `str` are read from `constants`. Blocks with the same source and
    constants share one compiled function."""
    constants = []

    def literal(value):
        if value is None or type(value) in (bool, int, str) or (
            type(value) is float and math.isfinite(value)
        ):
            return repr(value)
        constants.append(value)
        return f"constants[{len(constants) - 1}]"

    def expression(spec):
        kind, content = spec
        if kind == "value":
            return f"v{content}"
        if kind == "constant":
            return literal(content)
        if kind == "dict":
            return "{" + ", ".join(f"{literal(key)}: {expression(item)}" for key, item in content) + "}"
        items = [expression(item) for item in content]
        if kind == "list":
            return "[" + ", ".join(items) + "]"
        return "(" + "".join(f"{item}, " for item in items) + ")"

    def names(values):
        return "{" + ", ".join(map(repr, sorted(values))) + "}" if values else "set()"

    steps, outputs = region.program
    count = len(region.input_keys)
    lines = ["    (" + "".join(f"v{place}, " for place in range(count)) + ") = inputs"]
    for position, args_spec, kwargs_spec, outputs_count in steps:
        args, kwargs = expression(args_spec), expression(kwargs_spec)
        if region.parameters[position] is None:
            call = f"operations[{position}](*{args}, **{kwargs})"
        else:
            parameter_names, positional, defaults, mask_names, masks_default_none = (
                region.parameters[position]
            )
            default_items = ", ".join(
                f"{key!r}: {literal(value)}" for key, value in defaults.items()
            )
            record = (
                f"({names(parameter_names)}, {positional!r}, {{{default_items}}}, "
                f"{names(mask_names)}, {masks_default_none!r})"
            )
            takes = keras_internals.takes_training(region.operations[position])
            call = f"_run_layer(operations[{position}], {args}, {kwargs}, {record}, {takes!r}, training)"
        targets = "".join(f"v{count + number}, " for number in range(outputs_count))
        count += outputs_count
        lines.append(f"    ({targets}) = _results({call}, {outputs_count})" if targets else f"    {call}")
    lines.append("    return _with_masks((" + "".join(f"v{place}, " for place in outputs) + "))")
    return "\n".join(lines) + "\n", tuple(constants)


def _run_layer(layer, args, kwargs, parameters, takes_training, training):
    """A block program's call of `layer`: `training` passed where its
    `call` takes it and it is given, Keras masks as `__call__` fills them."""
    if takes_training and training is not None:
        kwargs["training"] = training
    return direct_call.call_with_masks(layer, args, kwargs, parameters)


def _results(result, count):
    """A step's `count` outputs: `result` itself for one, or flattened."""
    if count == 1 and not isinstance(result, (list, tuple, dict)):
        return (result,)
    return keras.tree.flatten(result)


def _with_masks(outputs):
    """`outputs`, then their Keras masks (None where none)."""
    return outputs + tuple(keras_internals.keras_mask(value) for value in outputs)


def _compiled_program(number, body):
    """`torch.compile` of the function of `body` (`_source`), named
    `_run_block_program_<number>`, a code object of its own (dynamo counts
    recompiles per code object), its source kept in `linecache` for
    tracebacks; caches go to `compile_cache.ensure()`'s folder."""
    import torch

    name = f"_run_block_program_{number}"
    source = f"def {name}(operations, inputs, training, constants):\n{body}"
    filename = f"<keras_attn.torch_runtime.compiled_blocks {name} #{next(_SOURCES)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"_run_layer": _run_layer, "_results": _results, "_with_masks": _with_masks}
    exec(compile(source, filename, "exec"), namespace)
    compile_cache.ensure()
    return torch.compile(namespace[name], backend=COMPILE_BACKEND)


def _static_blocker(operations):
    """`(layer, reason)` for a layer whose `__call__` would do more than
    `call` whatever the inputs (`direct_call.keras_call_reason`), or that
    is quantized, or None."""
    for operation in operations:
        if not isinstance(operation, keras.layers.Layer):
            continue
        reason = direct_call.keras_call_reason(operation)
        if reason is not None:
            return operation, reason
        if any(
            layer.quantization_mode is not None
            for layer in [operation, *keras_internals.all_layers(operation)]
        ):
            return operation, (
                "Keras' quantized layers call a custom autograd function, which "
                "torch.compile cannot trace in one graph"
            )
    return None


def _eager_reason(region, values):
    """Why `region` must run eagerly now, or None: an input not computed,
    an autocast scope or a distribution open, or a floating input of
    another dtype than the block computes in (`__call__` would cast it)."""
    if keras_internals.autocast_scope_active():
        return "an autocast scope is open"
    if keras.distribution.distribution() is not None:
        return "a distribution is set"
    if len(region.compute_dtypes) != 1:
        return f"its layers compute in several dtypes ({', '.join(region.compute_dtypes)})"
    import torch

    name = region.compute_dtypes[0]
    dtype = getattr(torch, name, None)
    for key in region.input_keys:
        value = values.get(key)
        if value is None:
            return "one of its inputs is not computed from the model's inputs"
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype:
            return f"it computes in {name} and is given a {value.dtype} input"
    return None
