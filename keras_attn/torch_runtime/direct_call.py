"""Calling a layer's `call` without Keras' `__call__`, where that is exact."""

import warnings
import weakref

import keras

from keras_attn import keras_internals
from keras_attn.concrete import torch_compiling


def calls_directly(layer, args, kwargs):
    """Whether `layer(*args, **kwargs)` may be computed by `call_directly`: on
    torch, a built layer with its first argument positional, whose
    `__call__` would do nothing beyond `call` but mask bookkeeping: no
    casting policy or autocast scope, floating arguments already of the
    layer's input dtype, no arrays or symbolic tensors, nothing that hooks
    into `__call__` (`keras_internals.needs_keras_call`, a distribution's
    layouts), and not while `torch.compile` traces."""
    if keras.config.backend() != "torch" or not layer.built or not args or torch_compiling():
        return False
    if (
        keras_call_reason(layer) is not None
        or keras_internals.autocast_scope_active()
        or keras.distribution.distribution() is not None
    ):
        return False
    import torch

    cast_to = None
    if layer.autocast and keras_internals.converts_inputs(layer):
        cast_to = getattr(torch, layer.input_dtype, None)
        if not isinstance(cast_to, torch.dtype):
            return False
    pending = [*args, *kwargs.values()]
    while pending:
        value = pending.pop()
        if isinstance(value, torch.Tensor):
            if cast_to is not None and value.is_floating_point() and value.dtype != cast_to:
                return False
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, keras.KerasTensor) or hasattr(value, "__array__"):
            return False
    return True


def keras_call_reason(layer):
    """Why `layer.__call__` would do more than `layer.call` whatever its
    arguments, or None: a mixed dtype policy (it casts), or
    rematerialisation, an activity regularizer or torch hooks
    (`keras_internals.needs_keras_call`)."""
    policy = layer.dtype_policy
    if policy.compute_dtype != policy.variable_dtype:
        return f"its dtype policy {policy.name!r} casts in `__call__`"
    if keras_internals.needs_keras_call(layer):
        return (
            "it has rematerialisation, an activity regularizer or torch hooks, "
            "which run in `__call__`"
        )
    return None


def call_directly(layer, *args, **kwargs):
    """What `layer(*args, **kwargs)` returns, computed by `layer.call` (by
    `quantized_call` when quantized; plain `Dense` and `LayerNormalization`
    by `keras_internals.torch_dense` and `torch_layer_norm`), only where
    `calls_directly` says so. Keras masks are filled into the call's `mask`
    or `<name>_mask` arguments and set on the outputs as `Layer.__call__`
    does."""
    return call_with_masks(layer, args, kwargs)


def call_with_masks(layer, args, kwargs, parameters=None):
    """`call_directly(layer, *args, **kwargs)` with the layer's
    `layer_parameters` given by a caller that `torch.compile` traces
    (`compiled_blocks`), where a cache lookup keyed by layer would bind one
    block's layers into every block's graph."""
    kwargs, previous_mask = _with_keras_masks(layer, args, kwargs, parameters)
    if len(args) == 1 and keras_internals.plain_torch_dense(layer, args[0]):
        outputs = keras_internals.torch_dense(layer, args[0])
    elif len(args) == 1 and keras_internals.plain_torch_layer_norm(layer, args[0]):
        outputs = keras_internals.torch_layer_norm(layer, args[0])
    else:
        outputs = _call(layer, args, kwargs)
    if layer.supports_masking:
        keras_internals.set_output_masks(layer, args[0], outputs, previous_mask)
    elif any(mask is not None for mask in keras.tree.flatten(previous_mask)):
        warnings.warn(
            f"Layer '{layer.name}' (of type {type(layer).__name__}) was passed an input "
            "with a Keras mask, but does not support masking: its outputs carry no "
            "mask, and later layers see none (as Keras' `Layer.__call__` warns)."
        )
    return outputs


def direct_call(layer, *args, **kwargs):
    """`layer(*args, **kwargs)`, computed by `layer.call` where that is exact
    (`calls_directly`), through Keras' `__call__` otherwise, which costs
    Python per call on torch. While `torch.compile` traces, a built layer
    without a mixed policy is traced through `call`."""
    if calls_directly(layer, args, kwargs):
        return call_directly(layer, *args, **kwargs)
    if torch_compiling() and layer.built:
        policy = layer.dtype_policy
        if policy.compute_dtype == policy.variable_dtype:
            # Traced by `torch.compile` (the compiled decoding step): `call`
            # itself, as traced before, with no Keras masks to handle.
            return _call(layer, args, kwargs)
    return layer(*args, **kwargs)


def keras_call(layer, *args, **kwargs):
    """`layer(*args, **kwargs)` through Keras' `__call__`: how the full pass
    calls a layer (on symbolic tensors it records the functional graph)."""
    return layer(*args, **kwargs)


def layer_caller(decoding):
    """Deprecated: a hook's pass runs its layers (`step.run`, see
    `keras_attn.models.passes`). `direct_call` when `decoding`, else
    `keras_call`, with a DeprecationWarning."""
    warnings.warn(
        "layer_caller(decoding) is deprecated; run layers by the pass a hook is given, "
        "`step.run(layer, ...)` (keras_attn.models.passes).",
        DeprecationWarning, stacklevel=2,
    )
    return direct_call if decoding else keras_call


def _call(layer, args, kwargs):
    """`layer.call(*args, **kwargs)`, or `quantized_call` for a quantized
    layer (`model.quantize`), as `Operation.__call__` picks. While
    `torch.compile` traces without autograd (the compiled decoding step), an
    int8 `Dense` runs its operations without Keras' custom-gradient wrapper,
    which the tracer cannot follow (`keras_internals.int8_dense_without_gradient`)."""
    if (
        len(args) == 1
        and torch_compiling()
        and keras_internals.plain_int8_dense(layer)
        and not _grad_enabled()
    ):
        return keras_internals.int8_dense_without_gradient(layer, args[0])
    if layer.quantization_mode is not None:
        return keras_internals.quantized_call(layer, *args, **kwargs)
    return layer.call(*args, **kwargs)


def _grad_enabled():
    import torch

    return torch.is_grad_enabled()


_PARAMETERS = weakref.WeakKeyDictionary()


def layer_parameters(layer):
    """`(names, positional, defaults, mask_names, masks_default_none)` of
    `layer.call`: its parameter names as a set, those taking positional
    arguments in order, the default values by name, its mask parameters
    (`mask`, `<name>_mask`) and whether every one of them defaults to
    None."""
    found = _PARAMETERS.get(layer)
    if found is None:
        parameters = keras_internals.call_signature(layer).parameters.values()
        names = {parameter.name for parameter in parameters}
        defaults = {
            parameter.name: parameter.default for parameter in parameters
            if parameter.default is not parameter.empty
        }
        mask_names = {name for name in names if name == "mask" or name.endswith("_mask")}
        found = (
            names,
            [parameter.name for parameter in parameters
             if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)],
            defaults,
            mask_names,
            all(defaults.get(name) is None for name in mask_names),
        )
        _PARAMETERS[layer] = found
    return found


def _is_tensor_argument(value):
    """Whether `Layer.__call__` counts `value` as a tensor argument: a
    tensor, or a non-empty list, tuple or dict of tensors (or None)."""
    if keras.ops.is_tensor(value):
        return True
    if isinstance(value, (list, tuple, dict)) and len(value) > 0:
        return all(
            item is None or keras.ops.is_tensor(item) for item in keras.tree.flatten(value)
        )
    return False


def _masked_or_nested(value):
    """Whether `value` is a container, or a tensor with a Keras mask."""
    if isinstance(value, (list, tuple, dict)):
        return True
    return keras.ops.is_tensor(value) and keras_internals.keras_mask(value) is not None


def _masks_of(value):
    """The Keras masks of a tensor or a structure of them, in its structure
    (None for each entry without one)."""
    if keras.ops.is_tensor(value):
        return keras_internals.keras_mask(value)
    if type(value) in (list, tuple):
        return type(value)(_masks_of(item) for item in value)
    return keras.tree.map_structure(keras_internals.keras_mask, value)


def _with_keras_masks(layer, args, kwargs, parameters=None):
    """`(kwargs, previous_mask)` as `Layer.__call__` makes them: `kwargs`
    with the Keras masks of the tensor arguments filled in, and the mask
    `compute_mask` then starts from (the `mask` keyword where given, else
    the first argument's Keras masks)."""
    names, positional, defaults, mask_names, masks_default_none = (
        parameters if parameters is not None else layer_parameters(layer)
    )
    if masks_default_none and not any(map(_masked_or_nested, args)) and not any(
        map(_masked_or_nested, kwargs.values())
    ):
        # No Keras mask to pass: what `__call__` fills in is None, as the
        # defaults are.
        return kwargs, kwargs.get("mask")
    given = kwargs.get("mask")
    if not mask_names:
        # No argument for a mask to fill: only the previous mask.
        return kwargs, given if given is not None else _masks_of(args[0])
    bound = {**defaults, **dict(zip(positional, args)), **kwargs}
    tensors = {name: value for name, value in bound.items() if _is_tensor_argument(value)}
    if len(tensors) == 1:
        if "mask" in names and bound.get("mask") is None:
            kwargs = {**kwargs, "mask": _masks_of(next(iter(tensors.values())))}
    elif len(tensors) > 1:
        for name, value in tensors.items():
            mask_name = f"{name}_mask"
            if mask_name in names and bound.get(mask_name) is None:
                kwargs = {**kwargs, mask_name: _masks_of(value)}
    given = kwargs.get("mask")
    return kwargs, given if given is not None else _masks_of(args[0])
