"""Virtual adversarial training (Miyato et al.'s VAT) on the model's own
predictions at a perturbed embedding table, as bert4keras's
`task_sentiment_virtual_adversarial_training.py`, on every backend."""

import functools
import numbers

import keras
import numpy as np
from keras import ops

from keras_attn.training.gradients import embedding_table
from keras_attn.training.gradients import state_mapping
from keras_attn.training.gradients import table_gradient


def _reads_bert4keras_positional_call(function):
    """Reads bert4keras's positional call, `(model, embedding_name, epsilon, xi,
    iters)`, when the second argument names a layer of `model`."""
    order = ("embedding_layer", "epsilon", "xi", "iterations")

    @functools.wraps(function)
    def call(model, *args, **kwargs):
        if not (args and isinstance(args[0], str) and _names_a_layer(model, args[0])):
            return function(model, *args, **kwargs)
        if len(args) > len(order):
            raise TypeError(
                f"{function.__name__}: bert4keras's positional call takes (model, "
                f"embedding_name, epsilon, xi, iters); received {len(args) + 1} positional "
                "arguments."
            )
        positional = dict(zip(order, args))
        twice = sorted(set(positional) & set(kwargs))
        if twice:
            raise TypeError(
                f"{function.__name__}: {twice} given both positionally (bert4keras's order: "
                "model, embedding_name, epsilon, xi, iters) and by keyword; give each once."
            )
        return function(model, **positional, **kwargs)

    return call


def _names_a_layer(model, name):
    return name in {layer.name for layer in getattr(model, "layers", ())}


@_reads_bert4keras_positional_call
def virtual_adversarial_training(
    model, epsilon=1.0, xi=10.0, iterations=1, embedding_layer="Embedding-Token", seed=None
):
    """Makes each training step of `model` a virtual adversarial step, the
    model's own predictions its targets (labels given are ignored).

    For a batch `x`, table `W` and compiled loss `L(p, x; W)` (with
    `loss="kl_divergence"`, `KL(p || p(x; W))`):

    1. `p = p(x; W)` in inference mode, held constant;
    2. `d` from a standard normal, then `iterations` times
       `d <- grad over W' of L(p, x; W')` at `W' = W + xi * d / (||d|| + 1e-8)`;
    3. `r = epsilon * d / (||d|| + 1e-8)` (norms over the whole table);
    4. Keras' ordinary step on `(x, p)` at the table `W + r`; then `r` is
       removed.

    Train it beside a supervised model with `InterleavedTraining`. The change
    lives on this model instance, not in `.keras` files.

    Args:
        model: a (later) compiled `keras.Model` with a trainable embedding layer.
        epsilon: the norm of `r`, a number >= 0.
        xi: the norm of the probe `d`, a number > 0.
        iterations: power-iteration steps, an int >= 0 (0: `r` is random).
        embedding_layer: the layer whose `embeddings` table is perturbed.
        seed: an int, for reproducible random directions.

    Returns:
        `model`.

    Raises:
        ValueError: a bad `epsilon`, `xi` or `iterations`, no such layer or
            trainable table, or a model already set up for adversarial training.

    Example:

    ```python
    model_vat = keras.Model(model.inputs, model.outputs)
    model_vat.compile(optimizer=keras.optimizers.Adam(1e-5), loss="kl_divergence")
    keras_attn.training.virtual_adversarial_training(model_vat, epsilon=1.0, xi=10.0)
    ```
    """
    _check_arguments(epsilon, xi, iterations)
    if getattr(model, "_adversarial_method", None) is not None:
        raise ValueError(
            f"Model {model.name!r} already trains with method="
            f"{model._adversarial_method!r}; apply one adversarial training once."
        )
    embeddings = embedding_table(model, embedding_layer, "virtual adversarial training")
    compute_loss = model.compute_loss
    settings = (float(epsilon), float(xi), int(iterations))
    if keras.config.backend() == "jax":
        step = _jax_step(model, compute_loss, embeddings, settings, seed)
    else:
        step = _stateful_step(model, compute_loss, embeddings, settings, seed)
    model.train_step = step
    model.compute_loss = _loss_without_labels(compute_loss)
    model._adversarial_method = "vat"
    # A train function made before this call would keep the plain step.
    model.train_function = None
    return model


def virtual_adversarial_perturbation(
    model,
    x,
    direction=None,
    epsilon=1.0,
    xi=10.0,
    iterations=1,
    sample_weight=None,
    embedding_layer="Embedding-Token",
    seed=None,
):
    """The perturbation `r` that `virtual_adversarial_training` trains `model` at
    for the batch `x` (its steps 1 to 3), at the current weights: a numpy
    array the table's shape, of norm `epsilon`.

    Args:
        model, epsilon, xi, iterations, embedding_layer, seed: as in
            `virtual_adversarial_training`.
        x: the inputs of one batch.
        direction: the starting probe `d`, the table's shape (ValueError
            otherwise); `None`: a standard normal draw.
        sample_weight: per-row loss weights, or `None`.
    """
    _check_arguments(epsilon, xi, iterations)
    embeddings = embedding_table(model, embedding_layer, "virtual adversarial training")
    if direction is None:
        direction = keras.random.normal(
            embeddings.shape, seed=keras.random.SeedGenerator(seed)
        )
    elif tuple(np.shape(direction)) != tuple(embeddings.shape):
        raise ValueError(
            f"`direction` must have the table's shape {tuple(embeddings.shape)}; "
            f"received shape {tuple(np.shape(direction))}."
        )
    target = ops.stop_gradient(model(x, training=False))
    delta = _perturbation(
        model, model.compute_loss, embeddings, x, target, sample_weight,
        ops.cast(direction, embeddings.dtype), float(epsilon), float(xi), int(iterations),
    )
    return np.asarray(ops.convert_to_numpy(delta))


def _loss_without_labels(compute_loss):
    """Batches without labels take the predictions as their targets."""

    def loss(x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if y is None:
            y = keras.tree.map_structure(ops.stop_gradient, y_pred)
        return compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
        )

    return loss


def _check_arguments(epsilon, xi, iterations):
    def number(value):
        return not isinstance(value, bool) and isinstance(value, numbers.Real)

    if not number(epsilon) or not epsilon >= 0:
        raise ValueError(f"`epsilon` must be a number >= 0; received {epsilon!r}.")
    if not number(xi) or not xi > 0:
        raise ValueError(f"`xi` must be a number > 0; received {xi!r}.")
    integral = isinstance(iterations, numbers.Integral) and not isinstance(iterations, bool)
    if not integral or iterations < 0:
        raise ValueError(f"`iterations` must be an int >= 0; received {iterations!r}.")


def _normalized(value):
    return value / (ops.sqrt(ops.sum(ops.square(value))) + 1e-8)


def _perturbation(
    model, compute_loss, embeddings, x, target, sample_weight, direction, epsilon, xi, iterations
):
    """Steps 2 and 3 from the probe `direction`, at the current variable values."""
    table = embeddings.value
    for _ in range(iterations):
        probe = xi * _normalized(direction)
        direction = table_gradient(
            model, compute_loss, embeddings, x, target, sample_weight,
            training=False, table=ops.stop_gradient(table + probe),
        )
    return ops.stop_gradient(epsilon * _normalized(direction))


def _stateful_step(model, compute_loss, embeddings, settings, seed):
    """TensorFlow and torch: perturb the table in place around Keras' step."""
    seed_generator = keras.random.SeedGenerator(seed)

    def train_step(data):
        x, _, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        target = ops.stop_gradient(model(x, training=False))
        direction = keras.random.normal(
            embeddings.shape, dtype=embeddings.dtype, seed=seed_generator
        )
        delta = _perturbation(
            model, compute_loss, embeddings, x, target, sample_weight, direction, *settings
        )
        embeddings.assign_add(delta)
        logs = type(model).train_step(
            model, keras.utils.pack_x_y_sample_weight(x, target, sample_weight)
        )
        embeddings.assign_sub(delta)
        return logs

    return train_step


def _jax_step(model, compute_loss, embeddings, settings, seed):
    """JAX: the same on the stateless step's variable values; the random
    direction's key is the seed and the optimizer's step count."""
    import jax

    index = next(i for i, v in enumerate(model.trainable_variables) if v is embeddings)
    seed = np.random.SeedSequence(seed).generate_state(1)[0] if seed is None else seed

    def train_step(state, data):
        trainable, non_trainable, optimizer_values, metrics_values = state
        x, _, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with keras.StatelessScope(state_mapping=state_mapping(model, state, optimizer=True)):
            target = ops.stop_gradient(model(x, training=False))
            key = jax.random.fold_in(
                jax.random.PRNGKey(int(seed) % 2**32), model.optimizer.iterations.value
            )
            direction = jax.random.normal(key, embeddings.shape, embeddings.dtype)
            delta = _perturbation(
                model, compute_loss, embeddings, x, target, sample_weight, direction, *settings
            )
        trainable = list(trainable)
        trainable[index] = trainable[index] + delta
        logs, state = type(model).train_step(
            model,
            (trainable, non_trainable, optimizer_values, metrics_values),
            keras.utils.pack_x_y_sample_weight(x, target, sample_weight),
        )
        trainable = list(state[0])
        trainable[index] = trainable[index] - delta
        return logs, (trainable,) + tuple(state[1:])

    return train_step
