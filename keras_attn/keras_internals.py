"""Every private Keras attribute keras_attn uses, each behind one function.

When a Keras upgrade renames or removes one, this module and
`tests/test_keras_internals.py` are the one place that breaks. Checked
against Keras 3.15.1 (`CHECKED_KERAS_VERSION`); after upgrading Keras, run
that test on every backend, then raise the version."""

import contextlib
import gc
import weakref

import keras
from keras import ops
from keras.src import backend as keras_backend
from keras.src.layers.merging.base_merge import Merge as _Merge

CHECKED_KERAS_VERSION = "3.15.1"


def all_layers(layer):
    """Every layer nested in `layer`, at any depth, without `layer` itself.

    Uses `Layer._flatten_layers` (`Model.layers` lists only direct layers)."""
    return layer._flatten_layers(include_self=False)


def direct_sublayers(layer):
    """The layers `layer` holds directly. Uses
    `Layer._flatten_layers(recursive=False)`."""
    return layer._flatten_layers(include_self=False, recursive=False)


def drop_variable(layer, attribute):
    """Removes the variable `layer.<attribute>` from `layer` and its variable
    lists. Uses `Layer._untrack_variable`; the attribute is removed with
    `object.__delattr__`, since Keras' `__delattr__` collects garbage per
    variable."""
    layer._untrack_variable(getattr(layer, attribute))
    object.__delattr__(layer, attribute)


@contextlib.contextmanager
def one_garbage_collection():
    """Inside the block `gc.collect()` only notes that it was called; one
    collection runs when the block ends, if any was asked for (process-wide
    while the block runs). Keras collects after each variable it removes,
    which makes `Model.quantize` slow in a large process."""
    collect = gc.collect
    asked = []

    def note(*args, **kwargs):
        asked.append(True)
        return 0

    gc.collect = note
    try:
        yield
    finally:
        gc.collect = collect
        if asked:
            collect()


def zero_pad(x, pad_width):
    """`keras.ops.pad(x, pad_width)` with zeros, by the backend's own
    `numpy.pad` for a concrete tensor: `keras.ops.pad` names a new `Pad`
    operation per call, and dynamo guards on Keras' name counter, so a
    compiled function that pads would recompile every call. Symbolic tensors
    go through `keras.ops.pad`. Uses `keras.src.backend.any_symbolic_tensors`."""
    from keras.src import backend

    if backend.any_symbolic_tensors((x,)):
        return ops.pad(x, pad_width)
    return backend.numpy.pad(x, pad_width)


def torch_adam_update(optimizer, grads, variables, learning_rate):
    """Keras' own torch Adam/AdamW update of `variables` (`torch._foreach_*`),
    for an `optimizer` subclassing `keras.optimizers.Adam`. Uses
    `keras.src.backend.torch.optimizers.torch_adam.Adam._parallel_update_step`
    (Keras swaps it in for `Adam`/`AdamW` themselves only)."""
    import torch
    from keras.src.backend.torch.optimizers import torch_adam

    with torch.no_grad():
        torch_adam.Adam._parallel_update_step(optimizer, grads, variables, learning_rate)


def fused_adam_update(optimizer, grads, variables, learning_rate):
    """Keras' Adam update of `variables` (moments and step, without weight
    decay) by `torch._fused_adamw_`, one pass per weight. Keras adds
    `epsilon` to `sqrt(v)` before the bias correction, torch after it, so the
    kernel gets `epsilon / sqrt(1 - beta_2^t)`. Uses
    `Optimizer._get_variable_index` and Adam's `_momentums`, `_velocities`
    and `_velocity_hats`."""
    import torch

    step = int(optimizer.iterations.numpy()) + 1
    learning_rate = float(keras.ops.convert_to_numpy(learning_rate))
    beta_1, beta_2 = float(optimizer.beta_1), float(optimizer.beta_2)
    epsilon = float(optimizer.epsilon) / (1.0 - beta_2**step) ** 0.5
    indices = [optimizer._get_variable_index(variable) for variable in variables]
    groups = {}
    for grad, variable, index in zip(grads, variables, indices):
        value = variable.value
        groups.setdefault((value.device, value.dtype), []).append((grad, value, index))
    with torch.no_grad():
        for (device, dtype), members in groups.items():
            steps = [torch.tensor(float(step), device=device)] * len(members)
            torch._fused_adamw_(
                [value for _, value, _ in members],
                [grad.to(dtype) for grad, _, _ in members],
                [optimizer._momentums[index].value for _, _, index in members],
                [optimizer._velocities[index].value for _, _, index in members],
                [optimizer._velocity_hats[index].value for _, _, index in members]
                if optimizer.amsgrad else [],
                steps,
                lr=learning_rate, beta1=beta_1, beta2=beta_2, weight_decay=0.0,
                eps=epsilon, amsgrad=bool(optimizer.amsgrad), maximize=False,
            )


def sync_torch_parameters(model):
    """On torch, makes the `torch.nn.Module` parameters of `model` and every
    layer in it match their Keras variables again after `drop_variable`;
    elsewhere does nothing. Uses `TorchLayer._track_variables`."""
    if keras.config.backend() != "torch":
        return
    for layer in [model, *all_layers(model)]:
        layer._track_variables()


def quantized_call(layer, *args, **kwargs):
    """What `layer(*args, **kwargs)` computes on a quantized layer, without
    `Layer.__call__`'s overhead. Uses `Layer.quantized_call`."""
    return layer.quantized_call(*args, **kwargs)


def int8_dense_without_gradient(layer, inputs):
    """What an int8 `keras.layers.Dense` computes for `inputs`
    (`Dense._int8_call`: the same operations in the same order), without the
    custom-gradient wrapper around its product, for a caller that needs no
    gradient. On torch that wrapper is an autograd function whose `forward`
    sets an attribute in a `try`, which `torch.compile` cannot trace: each
    quantized layer broke the compiled decoding step into pieces. Uses
    `Dense._kernel`, `kernel_scale`, `inputs_quantizer` and the LoRA
    attributes."""
    kernel_scale = ops.convert_to_tensor(layer.kernel_scale)
    output_scale = kernel_scale
    if layer.inputs_quantizer:
        quantized, inputs_scale = _abs_max_quantize(layer.inputs_quantizer, inputs)
        output_scale = ops.multiply(output_scale, inputs_scale)
    else:
        quantized = inputs
    x = ops.matmul(quantized, ops.convert_to_tensor(layer._kernel))
    x = ops.divide(ops.cast(x, layer.compute_dtype), output_scale)
    if layer.lora_enabled:
        lora_x = ops.matmul(ops.matmul(inputs, layer.lora_kernel_a), layer.lora_kernel_b)
        x = ops.add(x, (layer.lora_alpha / layer.lora_rank) * lora_x)
        x = ops.cast(x, layer.compute_dtype)
    if layer.bias is not None:
        x = ops.add(x, layer.bias)
    if layer.activation is not None:
        x = layer.activation(x)
    return x


def _abs_max_quantize(quantizer, inputs):
    """`quantizer(inputs, axis=-1)` for Keras' `AbsMaxQuantizer`
    (`quantizers.abs_max_quantize`, on the device), its maximum taken by
    `ops.amax`: the same values, without the result attribute probe in
    torch's `ops.max`, which `torch.compile` cannot trace."""
    low, high = quantizer.value_range
    scale = ops.divide(
        high, ops.add(ops.amax(ops.abs(inputs), axis=-1, keepdims=True), quantizer.epsilon)
    )
    scale = ops.cast(scale, keras.backend.standardize_dtype(inputs.dtype))
    outputs = ops.clip(ops.round(ops.multiply(inputs, scale)), low, high)
    return ops.cast(outputs, quantizer.output_dtype), scale


def plain_int8_dense(layer):
    """Whether `layer` is an int8 `keras.layers.Dense` whose int8 call is
    Keras' own (`int8_dense_without_gradient` computes it)."""
    return (
        isinstance(layer, keras.layers.Dense)
        and layer.quantization_mode == "int8"
        and type(layer)._int8_call is keras.layers.Dense._int8_call
        and type(layer).quantized_call is keras.layers.Dense.quantized_call
        and (
            not layer.inputs_quantizer
            or type(layer.inputs_quantizer) is keras.quantizers.AbsMaxQuantizer
        )
    )


def embedding_int8_lookup(embedding, inputs, training=None):
    """`keras.layers.Embedding`'s own int8 lookup of `inputs` on the quantized
    `embedding`, for a subclass that overrides `_int8_call`
    (`TokenEmbedding`). Uses `Embedding._int8_call`."""
    return keras.layers.Embedding._int8_call(embedding, inputs, training=training)


def int8_embedding_table(embedding):
    """The int8 table of a quantized `keras.layers.Embedding`, without the LoRA
    delta the `embeddings` property adds. Uses `Embedding._embeddings`."""
    return embedding._embeddings


def end_interrupted_jax_loop(model):
    """On JAX, ends the state of a `fit`/`evaluate`/`predict` loop that raised:
    writes its completed steps back to the variables (if that fails, the
    caller restores saved values) and forgets the loop's state. Uses
    `JAXTrainer._jax_state` and `_jax_state_synced`."""
    if getattr(model, "_jax_state", None) and not model._jax_state_synced:
        try:
            model.jax_state_sync()
        except Exception:  # noqa: BLE001 - the caller restores saved values
            pass
    model._jax_state = None
    model._jax_state_synced = True


class JaxLoopState:
    """A mixin for a `keras.Model` on JAX, before `keras.Model` among its bases:
    the state handed to Keras' compiled, donating steps never holds one array
    twice or an array that a variable outside the state also holds (Keras'
    EMA assigns a weight's array to its average, so donating one would delete
    the other), and the arrays a loop detaches are kept so that
    `reattach_after_interrupted_loop` can give them back if it raises.

    Overrides `JAXTrainer._get_jax_state` (Keras 3.15.1's code, with the
    copies and kept arrays added) and reads `_purge_model_variables`' rule: a
    running loop sets its variables' `_value` to None."""

    def _get_jax_state(self, trainable_variables=False, non_trainable_variables=False,
                       optimizer_variables=False, metrics_variables=False,
                       purge_model_variables=False):
        groups = []
        if trainable_variables:
            groups.append(self.trainable_variables)
        if non_trainable_variables:
            groups.append(self.non_trainable_variables)
        if optimizer_variables:
            groups.append(self.optimizer.variables)
        if metrics_variables:
            groups.append(self.metrics_variables)
        state = tuple([variable.value for variable in group] for group in groups)
        # Arrays that variables left out of the state hold: a step must not
        # donate them.
        outside = []
        if not optimizer_variables and getattr(self, "optimizer", None) is not None:
            outside += self.optimizer.variables
        if not metrics_variables:
            outside += self.metrics_variables
        seen = {id(variable._value) for variable in outside if variable._value is not None}
        for values in state:
            for index, value in enumerate(values):
                if id(value) in seen:
                    values[index] = keras.ops.copy(value)
                else:
                    seen.add(id(value))
        if purge_model_variables:
            kept = _detached_arrays.setdefault(self, {})
            for group in groups:
                for variable in group:
                    kept[id(variable)] = (variable, variable._value)
                    variable._value = None
        return state


# Per model, while a loop runs: `{id(variable): (variable, array)}` of the
# variables `JaxLoopState` detached, to give back if the loop raises.
_detached_arrays = weakref.WeakKeyDictionary()


# Per model: how many of its `keeping_jax_arrays` calls are running.
_call_depth = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def keeping_jax_arrays(model):
    """Runs a `fit`, `evaluate`, `predict` or `*_on_batch` call of `model` (a
    `JaxLoopState` on JAX): if it raises, the completed steps are written
    back and every detached variable gets its array back. The kept arrays are
    dropped when the outermost such call ends."""
    depth = _call_depth.get(model, 0)
    _call_depth[model] = depth + 1
    try:
        yield
    except BaseException:
        end_interrupted_jax_loop(model)
        for variable, array in _detached_arrays.pop(model, {}).values():
            if variable._value is None:
                variable._value = array
        raise
    finally:
        if depth:
            _call_depth[model] = depth
        else:
            _call_depth.pop(model, None)
            _detached_arrays.pop(model, None)


def functional_steps(model):
    """The layer calls of the functional `model` in `Functional.call`'s order:
    `(operation, args, kwargs, outputs)` per node, as the node recorded them.
    Uses `Function._nodes_by_depth`, `Node.arguments` and `Node.is_input`."""
    steps = []
    for depth in sorted(model._nodes_by_depth, reverse=True):
        for node in model._nodes_by_depth[depth]:
            if not node.operation or node.is_input:
                continue
            steps.append(
                (node.operation, node.arguments.args, node.arguments.kwargs, node.outputs)
            )
    return steps


def standardized_inputs(model, inputs):
    """`inputs` as the flat list of tensors, in `model.inputs` order, that
    `Functional.call` runs the graph on (converted to tensors, ranks
    adjusted). Uses `Functional._standardize_inputs`."""
    return model._standardize_inputs(inputs)


def takes_training(layer):
    """Whether `layer.call` takes a `training` argument (which `__call__`
    then fills from the call context). Uses `Layer._call_has_context_arg`."""
    return layer._call_has_context_arg.get("training", False)


def converts_inputs(layer):
    """Whether `layer.__call__` converts its arguments (floating tensors to
    the compute dtype, arrays to tensors). Uses `Layer._convert_input_args`."""
    return layer._convert_input_args


def needs_keras_call(layer):
    """Whether `layer.__call__` does more than `layer.call` (or
    `quantized_call`) on a built layer with tensors of its compute dtype
    and no Keras masks: rematerialisation (`Layer._remat_mode`), an activity
    regularizer, or torch hooks registered on the layer (`_forward_hooks`,
    `_forward_pre_hooks` of `torch.nn.Module`)."""
    return (
        getattr(layer, "_remat_mode", None) is not None
        or layer.activity_regularizer is not None
        or bool(getattr(layer, "_forward_hooks", None))
        or bool(getattr(layer, "_forward_pre_hooks", None))
    )


def reshape(x, shape):
    """`keras.ops.reshape(x, shape)` by the backend's own `numpy.reshape`,
    without Keras' search for symbolic tensors; a `KerasTensor` goes through
    `keras.ops.reshape`. `shape` holds ints or the backend's scalar tensors."""
    if isinstance(x, keras.KerasTensor):
        return ops.reshape(x, shape)
    return keras_backend.numpy.reshape(x, shape)


def keras_mask(x):
    """The Keras mask attached to tensor `x`, or None
    (`keras.src.backend.get_keras_mask`; Keras exports no getter)."""
    return keras_backend.get_keras_mask(x)


def autocast_scope_active():
    """Whether Keras' autocast scope (a mixed-precision call's) is open
    (`keras.src.backend.get_autocast_scope`)."""
    return keras_backend.get_autocast_scope() is not None


# Keras' per-thread settings that read as None while unset
# (`keras.src.backend.common.global_state`): scopes, the torch device, the
# layer call context.
_NONE_WHILE_UNSET = (
    "autocast_scope", "stateless_scope", "symbolic_scope", "torch_device", "current_call_ctx",
)


def settle_thread_state():
    """Sets each of Keras' per-thread settings that reads None while unset
    (`_NONE_WHILE_UNSET`) to None in this thread where it is unset: no value
    Keras reads changes. dynamo guards whether Keras' thread-local state
    has the attribute, not only its value, so without this a function
    compiled in one thread compiles again in a thread where Keras never set
    them (a server's worker thread). Uses `global_state.GLOBAL_STATE_TRACKER`."""
    from keras.src.backend.common import global_state

    tracker = global_state.GLOBAL_STATE_TRACKER
    for name in _NONE_WHILE_UNSET:
        if not hasattr(tracker, name):
            setattr(tracker, name, None)


def set_output_masks(layer, inputs, outputs, previous_mask):
    """Attaches to `outputs` the Keras masks `layer.compute_mask(inputs,
    previous_mask)` gives, where they have none, as `Layer.__call__` does
    (`Layer._set_mask_metadata`); a merge layer with an unmasked input sets
    none."""
    if (
        type(layer).compute_mask is keras.layers.Layer.compute_mask
        and ops.is_tensor(outputs)
        and (previous_mask is None or ops.is_tensor(previous_mask))
    ):
        if previous_mask is not None and keras_mask(outputs) is None:
            keras_backend.set_keras_mask(outputs, previous_mask)
        return
    if (
        type(layer).compute_mask is _Merge.compute_mask
        and isinstance(inputs, (list, tuple))
        and isinstance(previous_mask, (list, tuple))
        and len(previous_mask) == len(inputs)
        and any(mask is None for mask in previous_mask)
    ):
        return  # a merge (`Add`, ...) of an unmasked input has no mask
    layer._set_mask_metadata(inputs, outputs, previous_mask)


def call_signature(layer):
    """`inspect.signature(layer.call)`, as Keras keeps it
    (`Layer._call_signature`)."""
    return layer._call_signature


def takes_context(operation, name):
    """Whether `Functional.call` hands the call-context argument `name`
    (`training`) to `operation` (`Layer._call_context_args`)."""
    return name in getattr(operation, "_call_context_args", ())


def plain_torch_dense(layer, inputs):
    """Whether `torch_dense` computes `layer.call(inputs)`: `layer` is a
    `keras.layers.Dense` itself (not a subclass), without quantization or
    LoRA, and `inputs` a torch tensor of its kernel's dtype."""
    return (
        type(layer) is keras.layers.Dense
        and layer.quantization_mode is None
        and not layer.lora_enabled
        and keras.config.backend() == "torch"
        and ops.is_tensor(inputs)
        and inputs.dtype == layer._kernel.value.dtype
    )


def torch_dense(layer, inputs):
    """`keras.layers.Dense.call(inputs)` on torch (where `plain_torch_dense`
    holds) with torch's ops alone: `inputs @ kernel`, the bias added in place,
    the activation. Uses `Dense._kernel` (the `kernel` property adds LoRA and
    unpacks quantized kernels)."""
    import torch

    outputs = torch.matmul(inputs, layer._kernel.value)
    if layer.bias is not None:
        outputs.add_(layer.bias.value)
    if layer.activation is not None:
        outputs = layer.activation(outputs)
    return outputs


def plain_torch_layer_norm(layer, inputs):
    """Whether `torch_layer_norm` computes `layer.call(inputs)`: `layer` is
    a `keras.layers.LayerNormalization` itself (not a subclass) over the
    last axis, without `rms_scaling`, and `inputs` a torch float32 tensor
    of its compute dtype."""
    return (
        type(layer) is keras.layers.LayerNormalization
        and layer.axis in (-1, [-1])
        and not layer.rms_scaling
        and keras.config.backend() == "torch"
        and ops.is_tensor(inputs)
        and layer.compute_dtype == "float32"
        and str(inputs.dtype) == "torch.float32"
    )


def torch_layer_norm(layer, inputs):
    """`keras.layers.LayerNormalization.call(inputs)` on torch (where
    `plain_torch_layer_norm` holds) by `torch.nn.functional.layer_norm`,
    without Keras' dtype conversions, which are no-ops on float32."""
    import torch

    gamma = None if layer.gamma is None else layer.gamma.value
    beta = None if layer.beta is None else layer.beta.value
    return torch.nn.functional.layer_norm(
        inputs, inputs.shape[-1:], gamma, beta, layer.epsilon
    )


def set_keras_mask(x, mask):
    """Sets `mask` as the Keras mask of the tensor `x`
    (`keras.src.backend.set_keras_mask`)."""
    keras_backend.set_keras_mask(x, mask)


def in_stateless_or_symbolic_scope():
    """Whether a `keras.StatelessScope` or a symbolic scope
    (`compute_output_spec`) is open. Uses `keras.src.backend.common`'s
    `in_stateless_scope` and `in_symbolic_scope`."""
    from keras.src.backend.common.stateless_scope import in_stateless_scope
    from keras.src.backend.common.symbolic_scope import in_symbolic_scope

    return in_stateless_scope() or in_symbolic_scope()


def jit_compile_requested(model):
    """Whether `model.compile(jit_compile=True)` asked for compilation
    (Keras' `_jit_compile`, True, False or "auto" before it resolves)."""
    return getattr(model, "_jit_compile", None) is True


@contextlib.contextmanager
def jit_compile_off(model):
    """Within this scope Keras' trainer makes its step functions without
    `torch.compile` (Keras reads `_jit_compile` then); the setting is given
    back after."""
    model._jit_compile = False
    try:
        yield
    finally:
        model._jit_compile = True
