"""`adversarial_training`: FGM embedding perturbation and the gradient penalty,
as bert4keras has them, wrapping Keras' own train step and loss."""

import keras
from keras import ops

from keras_attn.training.gradients import embedding_table
from keras_attn.training.gradients import state_mapping
from keras_attn.training.gradients import table_gradient

METHODS = ("fgm", "gradient_penalty")


def adversarial_training(model, method="fgm", epsilon=1.0, embedding_layer="Embedding-Token"):
    """Trains `model` adversarially on its embedding table, in `fit` and
    `train_on_batch`, compiled or not; returns `model`.

    - `"fgm"` (Miyato et al.'s fast gradient method): each step adds
      `delta = epsilon * g / (||g|| + 1e-8)` to the table, `g` the loss's
      gradient with respect to it, runs the ordinary step there, then removes
      `delta`.
    - `"gradient_penalty"`: the training loss becomes
      `loss + 0.5 * epsilon * ||g||^2` (`g` dense); evaluation reports `loss`.

    The change lives on this model instance, not in `.keras` files.

    Args:
        model: a `keras.Model` with a trainable embedding layer.
        method: `"fgm"` or `"gradient_penalty"`; a layer's name is read as
            bert4keras's positional `(model, embedding_name, epsilon)`: FGM.
        epsilon: the perturbation's norm (FGM) or the penalty's weight, >= 0.
        embedding_layer: the layer whose `embeddings` table is perturbed.

    Raises:
        ValueError: an unknown `method`, a negative `epsilon`, no such layer or
            trainable table, or a model already set up for adversarial training.

    Example:

    >>> keras_attn.training.adversarial_training(model, epsilon=0.5)
    """
    if method not in METHODS and method in {layer.name for layer in model.layers}:
        if embedding_layer != "Embedding-Token":
            raise ValueError(
                f"adversarial_training: `method={method!r}` names a layer (bert4keras's "
                f"positional embedding_name) and `embedding_layer={embedding_layer!r}` "
                "another; give the layer once, as `embedding_layer`."
            )
        method, embedding_layer = "fgm", method
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {list(METHODS)}; received {method!r}.")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0:
        raise ValueError(f"`epsilon` must be a number >= 0; received {epsilon!r}.")
    if getattr(model, "_adversarial_method", None) is not None:
        raise ValueError(
            f"Model {model.name!r} already trains with method="
            f"{model._adversarial_method!r}; apply adversarial_training once."
        )
    embeddings = embedding_table(model, embedding_layer, "adversarial training")
    compute_loss = model.compute_loss  # the model's own, before any change
    if method == "fgm":
        step = _jax_fgm_step if keras.config.backend() == "jax" else _stateful_fgm_step
        model.train_step = step(model, compute_loss, embeddings, float(epsilon))
    else:
        model.compute_loss = _penalised_loss(model, compute_loss, embeddings, float(epsilon))
    model._adversarial_method = method
    # A train function made before this call would keep the plain step.
    model.train_function = None
    return model


def _perturbation(gradient, epsilon):
    norm = ops.sqrt(ops.sum(ops.square(gradient)))
    return epsilon * gradient / (norm + 1e-8)


def _stateful_fgm_step(model, compute_loss, embeddings, epsilon):
    """TensorFlow and torch: perturb the table in place around Keras' step."""

    def train_step(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        delta = _perturbation(
            table_gradient(model, compute_loss, embeddings, x, y, sample_weight), epsilon
        )
        embeddings.assign_add(ops.cast(delta, embeddings.dtype))
        logs = type(model).train_step(model, data)
        embeddings.assign_sub(ops.cast(delta, embeddings.dtype))
        return logs

    return train_step


def _jax_fgm_step(model, compute_loss, embeddings, epsilon):
    """JAX: the same on the stateless step's variable values."""
    index = next(i for i, v in enumerate(model.trainable_variables) if v is embeddings)

    def train_step(state, data):
        trainable, non_trainable, optimizer_values, metrics_values = state
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with keras.StatelessScope(state_mapping=state_mapping(model, state)):
            gradient = table_gradient(model, compute_loss, embeddings, x, y, sample_weight)
        delta = _perturbation(gradient, epsilon)
        trainable = list(trainable)
        trainable[index] = trainable[index] + delta
        logs, state = type(model).train_step(
            model, (trainable, non_trainable, optimizer_values, metrics_values), data
        )
        trainable = list(state[0])
        trainable[index] = trainable[index] - delta
        return logs, (trainable,) + tuple(state[1:])

    return train_step


def _penalised_loss(model, compute_loss, embeddings, epsilon):
    def penalised(x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
        )
        if not training:
            return loss
        gradient = table_gradient(
            model, compute_loss, embeddings, x, y, sample_weight, differentiable=True
        )
        return loss + 0.5 * epsilon * ops.sum(ops.square(ops.cast(gradient, loss.dtype)))

    return penalised
