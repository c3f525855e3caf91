"""A gradient, written once per backend (`keras.ops` has none): adversarial
training, VAT and integrated gradients differentiate through it."""

import contextlib

import keras

from keras_attn.layers.dot_product_attention import higher_order_gradients


def gradient(function, value, differentiable=False):
    """The dense gradient of the scalar `function(value)` with respect to `value`.
    `differentiable`: the result is itself differentiated (the gradient
    penalty), so attention takes a twice-differentiable path
    (`higher_order_gradients`)."""
    if not differentiable:
        return _GRADIENTS[keras.config.backend()](function, value, differentiable)
    with higher_order_gradients():
        return _GRADIENTS[keras.config.backend()](function, value, differentiable)


def _tensorflow_gradient(function, value, differentiable):
    import tensorflow as tf

    # An enclosing tape (Keras' step, for the penalty) records this one's
    # computation too, so the result is differentiable.
    with tf.GradientTape() as tape:
        tape.watch(value)
        result = function(value)
    # A gather's gradient comes as IndexedSlices: densify.
    return tf.convert_to_tensor(tape.gradient(result, value))


def _torch_gradient(function, value, differentiable):
    import torch

    with torch.enable_grad():
        if not value.requires_grad:
            value = value.detach().requires_grad_(True)
        result = function(value)
        (value_gradient,) = torch.autograd.grad(result, value, create_graph=differentiable)
    return value_gradient


def _jax_gradient(function, value, differentiable):
    import jax

    # Inside an enclosing jax.grad the result is differentiable as it is.
    return jax.grad(function)(value)


_GRADIENTS = {
    "tensorflow": _tensorflow_gradient,
    "torch": _torch_gradient,
    "jax": _jax_gradient,
}


def table_gradient(
    model,
    compute_loss,
    embeddings,
    x,
    y,
    sample_weight,
    training=True,
    differentiable=False,
    table=None,
):
    """The dense gradient of `compute_loss` with respect to the variable
    `embeddings`, at the current values (inside a `keras.StatelessScope`,
    the scope's) or at `table` for the table."""
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    metrics = [(v, v.value) for v in model.metrics_variables]
    index = next(i for i, v in enumerate(model.trainable_variables) if v is embeddings)

    def loss_at(table):
        values = list(trainable)
        values[index] = table
        y_pred, _ = model.stateless_call(values, non_trainable, x, training=training)
        # Metric updates of the loss are discarded with this scope.
        with keras.StatelessScope(state_mapping=metrics):
            return compute_loss(
                x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
            )

    return gradient(loss_at, trainable[index] if table is None else table, differentiable)


@contextlib.contextmanager
def replaced_output(layer, transform):
    """Within the block, each look-up of `layer` (not a `reverse=True` call)
    returns `transform(output)`. An instance attribute `call` replaces the
    class's (checked against Keras 3.15.1); a quantized layer is refused."""
    if layer.dtype_policy.quantization_mode is not None:
        raise ValueError(
            f"Layer {layer.name!r} is quantized ({layer.dtype_policy.quantization_mode!r}); "
            "gradients with respect to its output need the float layer."
        )
    original = layer.call

    def call(*args, **kwargs):
        output = original(*args, **kwargs)
        return output if kwargs.get("reverse") else transform(output)

    # object's own attribute functions: Keras' and torch's __setattr__ would
    # track the function, and Keras' __delattr__ collects garbage.
    object.__setattr__(layer, "call", call)
    try:
        yield
    finally:
        object.__delattr__(layer, "call")


def embedding_table(model, embedding_layer, what):
    """The trainable `embeddings` table of the layer named `embedding_layer`,
    which `what` perturbs; a ValueError naming the model and layer otherwise."""
    try:
        layer = model.get_layer(embedding_layer)
    except ValueError as error:
        raise ValueError(
            f"Model {model.name!r} has no layer named {embedding_layer!r} to perturb; "
            "pass the name of its embedding layer as `embedding_layer`."
        ) from error
    embeddings = getattr(layer, "embeddings", None)
    if embeddings is None or not any(v is embeddings for v in model.trainable_variables):
        raise ValueError(
            f"Layer {embedding_layer!r} of model {model.name!r} has no trainable "
            f"`embeddings` table; {what} perturbs one."
        )
    return embeddings


def state_mapping(model, state, optimizer=False):
    """`(variable, value)` pairs of a JAX stateless train step's `state` for a
    `keras.StatelessScope` (the optimizer's too with `optimizer`)."""
    trainable, non_trainable, optimizer_values, metrics_values = state
    mapping = (
        list(zip(model.trainable_variables, trainable))
        + list(zip(model.non_trainable_variables, non_trainable))
        + list(zip(model.metrics_variables, metrics_values))
    )
    if optimizer:
        mapping += list(zip(model.optimizer.variables, optimizer_values))
    return mapping
