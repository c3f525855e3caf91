"""`embedding_gradients` and `integrated_gradients`: which input tokens a
prediction rests on, from gradients with respect to the token embeddings,
on every backend (bert4keras's `task_sentiment_integrated_gradients.py`)."""

import numbers

import keras
import numpy as np
from keras import ops

from keras_attn.training.gradients import gradient
from keras_attn.training.gradients import replaced_output


def embedding_gradients(model, inputs, target, scale=1.0, embedding_layer="Embedding-Token"):
    """The gradient of a prediction score with respect to the output of the
    embedding layer, at that output scaled by `scale`.

    With `e` the layer's output for `inputs`, `(batch, length, width)`, and
    `f(e)` the model's prediction computed from it (inference mode, every
    other input and layer as they are), returns `g = d s / d e'` at
    `e' = scale * e`, where `s = sum over rows b of f(e')[b, target_b]`.
    Rows are independent, so `g[b]` is the gradient of row `b`'s own score.
    `scale=1` is the plain saliency gradient; `scale` from 0 to 1 walks the
    straight path from the zero embedding that integrated gradients
    averages over (`integrated_gradients`). bert4keras's script gets this by
    scaling the embedding table, as `e` is the table's rows.

    Args:
        model: a `keras.Model` that calls `embedding_layer` once per pass
            (a tied head's `reverse=True` projection aside).
        inputs: what `model` takes (token ids, or a list with segment ids).
        target: the class whose score is differentiated: an int, or one int
            per row of the batch, indexing the last axis of a
            `(batch, classes)` output; or a callable taking the model's
            outputs and returning one score per row, `(batch,)`.
        scale: the factor applied to the embedding output, a number.
        embedding_layer: the name of the layer whose output is
            differentiated (the builder's `"Embedding-Token"`).

    Returns:
        `(gradients, embedded)`: numpy float arrays of shape
        `(batch, length, width)`, the gradient at `scale * e` and `e`.

    Raises:
        ValueError: a model without that layer, a layer called more than
            once per pass, or an integer `target` for an output that is not
            `(batch, classes)` or outside its classes.

    Example:

    ```python
    gradients, embedded = keras_attn.training.embedding_gradients(
        model, token_ids, target=1
    )
    saliency = np.linalg.norm(gradients * embedded, axis=-1)  # (batch, length)
    ```
    """
    layer = _embedding_layer(model, embedding_layer)
    embedded = _layer_output(model, layer, inputs)
    gradient_at = _gradient_function(model, layer, inputs, target)
    return gradient_at(embedded * float(scale)), embedded


def integrated_gradients(model, inputs, target, steps=20, embedding_layer="Embedding-Token"):
    """Integrated gradients (Sundararajan et al., 2017) of a prediction
    score with respect to the token embeddings, from the zero embedding.

    With `e` the embedding layer's output and `g(e')` the gradient of the
    score at `e'` (`embedding_gradients`), the attribution of each
    embedding component is

        a = e * integral over alpha in [0, 1] of g(alpha * e) d alpha,

    computed by the midpoint rule, `alpha = (k + 0.5) / steps`. Summed over
    a row's tokens and width, attributions add up to the score's change
    from the zero-embedding baseline, `f(e) - f(0)` (completeness), up to
    the rule's error, which falls as `1 / steps**2`. Only the embedding
    layer's output goes to zero on the baseline (segment and position
    embeddings stay). bert4keras's script averages `alpha * e * g(alpha * e)`
    over `alpha = k / (steps - 1)`, a different weighting of the same
    path, and so does not add up to `f(e) - f(0)`.

    Args:
        model: a `keras.Model` that calls `embedding_layer` once per pass.
        inputs: what `model` takes.
        target: the class whose score is attributed, as in
            `embedding_gradients`: an int, one int per row, or a callable
            returning one score per row.
        steps: the number of points on the path, an int >= 1.
        embedding_layer: the name of the embedding layer.

    Returns:
        The attributions, a numpy array of shape `(batch, length, width)`.
        One score per token: their sum over the last axis (signed, adding
        up to `f(e) - f(0)`), or their norm, as bert4keras's script ranks
        tokens.

    Raises:
        ValueError: `steps` not an int >= 1, or as `embedding_gradients`.

    Example:

    ```python
    attributions = keras_attn.training.integrated_gradients(
        model, token_ids, target=1, steps=20
    )
    token_scores = attributions.sum(axis=-1)  # (batch, length)
    ```
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
    """`g(value)`: the gradient of the score with the layer's output
    replaced by `value`, a numpy array."""
    score = _score_function(model, target)

    def score_at(value):
        with replaced_output(layer, lambda output: ops.cast(value, output.dtype)):
            return score(model(inputs, training=False))

    def gradient_at(value):
        start = ops.convert_to_tensor(np.asarray(value, "float32"))
        return _numpy(gradient(score_at, start))

    return gradient_at


def _layer_output(model, layer, inputs):
    """The layer's output in a pass over `inputs`, refusing a layer looked
    up more than once (its outputs could not all take one value)."""
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
