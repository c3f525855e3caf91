"""Which input tokens a prediction rests on, from gradients with respect to
the token embeddings (bert4keras's `task_sentiment_integrated_gradients.py`)."""

import numbers

import keras
import numpy as np
from keras import ops

from keras_attn.training.gradients import gradient
from keras_attn.training.gradients import replaced_output


def embedding_gradients(model, inputs, target, scale=1.0, embedding_layer="Embedding-Token"):
    """The gradient of a prediction score with respect to the embedding layer's
    output `e`, `(batch, length, width)`, taken at `scale * e`.

    The score is the sum over rows `b` of `f(e')[b, target_b]` (inference
    mode); rows are independent. `scale=1` is the saliency gradient.

    Args:
        model: a `keras.Model` that looks `embedding_layer` up once per pass.
        inputs: what `model` takes.
        target: the class whose score is differentiated: an int or one int per
            row, indexing a `(batch, classes)` output; or a callable taking the
            outputs and returning one score per row.
        scale: the factor applied to the embedding output.
        embedding_layer: the layer's name.

    Returns:
        `(gradients, embedded)`: numpy `(batch, length, width)` arrays, the
        gradient at `scale * e` and `e`.

    Raises:
        ValueError: no such layer, a layer looked up more than once per pass,
            or an integer `target` that does not index a `(batch, classes)`
            output.
    """
    layer = _embedding_layer(model, embedding_layer)
    embedded = _layer_output(model, layer, inputs)
    gradient_at = _gradient_function(model, layer, inputs, target)
    return gradient_at(embedded * float(scale)), embedded


def integrated_gradients(model, inputs, target, steps=20, embedding_layer="Embedding-Token"):
    """Integrated gradients (Sundararajan et al., 2017) of a prediction score with
    respect to the token embeddings, from the zero embedding.

    With `e` the embedding layer's output and `g` as in `embedding_gradients`:

        a = e * integral over alpha in [0, 1] of g(alpha * e) d alpha,

    by the midpoint rule, `alpha = (k + 0.5) / steps`. Attributions add up to
    `f(e) - f(0)` up to an error in `1 / steps**2` (bert4keras's average does
    not). Returns them, numpy `(batch, length, width)`.

    Args:
        model, inputs, target, embedding_layer: as in `embedding_gradients`.
        steps: the number of points on the path, an int >= 1.

    Raises:
        ValueError: `steps` not an int >= 1, or as `embedding_gradients`.

    Example:

    >>> attributions = keras_attn.training.integrated_gradients(model, token_ids, target=1)
    >>> token_scores = attributions.sum(axis=-1)  # (batch, length)
    """
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise ValueError(f"`steps` must be an int >= 1; received {steps!r}.")
    layer = _embedding_layer(model, embedding_layer)
    embedded = _layer_output(model, layer, inputs)
    gradient_at = _gradient_function(model, layer, inputs, target)
    total = 0.0
    for step in range(steps):
        total = total + gradient_at(embedded * ((step + 0.5) / steps)).astype(np.float64)
    return (embedded * total / steps).astype(embedded.dtype)


def _embedding_layer(model, name):
    try:
        return model.get_layer(name)
    except ValueError as error:
        raise ValueError(
            f"Model {model.name!r} has no layer named {name!r} to differentiate at; "
            "pass the name of its embedding layer as `embedding_layer`."
        ) from error


def _gradient_function(model, layer, inputs, target):
    """`g(value)`: the score's gradient with the layer's output replaced by `value`."""
    score = _score_function(model, target)

    def score_at(value):
        with replaced_output(layer, lambda output: ops.cast(value, output.dtype)):
            return score(model(inputs, training=False))

    def gradient_at(value):
        start = ops.convert_to_tensor(np.asarray(value, "float32"))
        return _numpy(gradient(score_at, start))

    return gradient_at


def _layer_output(model, layer, inputs):
    """The layer's output in a pass over `inputs`; ValueError for a layer looked
    up more than once."""
    outputs = []

    def record(output):
        outputs.append(output)
        return output

    with replaced_output(layer, record):
        model(inputs, training=False)
    if len(outputs) != 1:
        raise ValueError(
            f"Layer {layer.name!r} of model {model.name!r} is looked up {len(outputs)} "
            "times in one pass; embedding gradients need a layer looked up once."
        )
    return _numpy(outputs[0])


def _score_function(model, target):
    if callable(target):
        return lambda outputs: ops.sum(ops.cast(target(outputs), "float32"))
    output_shape = model.outputs[0].shape if len(model.outputs) == 1 else None
    if output_shape is None or len(output_shape) != 2:
        raise ValueError(
            f"An integer `target` indexes a (batch, classes) output; model {model.name!r} "
            f"has outputs {[tuple(o.shape) for o in model.outputs]}. Pass a callable "
            "returning one score per row instead."
        )
    targets = np.asarray(target)
    if not np.issubdtype(targets.dtype, np.integer) or targets.ndim > 1:
        raise ValueError(
            f"`target` must be an int, one int per row, or a callable; received {target!r}."
        )
    classes = output_shape[1]
    if classes is not None and (np.any(targets < 0) or np.any(targets >= classes)):
        raise ValueError(
            f"`target` must index the output's {classes} classes; received {target!r}."
        )

    def score(outputs):
        one_hot = ops.one_hot(ops.convert_to_tensor(targets, "int32"), ops.shape(outputs)[-1])
        return ops.sum(ops.cast(outputs, "float32") * one_hot)

    return score


def _numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value))
