"""`virtual_adversarial_training`: semi-supervised training on the model's
own predictions at an adversarially perturbed embedding table (Miyato et
al.'s VAT), as bert4keras's `task_sentiment_virtual_adversarial_training.py`
has it, on the TensorFlow, JAX and torch backends, compiled or not.
`virtual_adversarial_perturbation` is its perturbation alone."""

import functools
import numbers

import keras
import numpy as np
from keras import ops

from keras_attn.training.gradients import embedding_table
from keras_attn.training.gradients import state_mapping
from keras_attn.training.gradients import table_gradient


def _reads_bert4keras_positional_call(function):
    """bert4keras's script defines `virtual_adversarial_training(model,
    embedding_name, epsilon=1, xi=10, iters=1)` and calls it as
    `virtual_adversarial_training(model_vat, "Embedding-Token")`: a second
    positional argument that names a layer of `model` starts that order
    (as `adversarial_training` reads its positional call). The signature
    shown stays `function`'s."""
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
    """Makes each training step of `model` (`fit`, `train_on_batch`) a
    virtual adversarial step: labels are not needed, the model's own
    predictions are the targets.

    For a batch `x`, with `W` the embedding table and `L(p, x; W)` the
    model's compiled loss of targets `p` and its predictions on `x` with the
    table `W` (compile with `loss="kl_divergence"`, as bert4keras's script
    does, and `L` is `KL(p || p(x; W))`):

    1. `p = p(x; W)`, the predictions in inference mode, held constant;
    2. `d` is drawn from a standard normal, the shape of `W`; then
       `iterations` times: `d <- xi * d / (||d|| + 1e-8)`,
       `d <- grad over W' of L(p, x; W')` at `W' = W + d` (inference mode);
    3. `r = epsilon * d / (||d|| + 1e-8)` (norms over the whole table);
    4. Keras' ordinary step runs on `(x, p)` at the table `W + r`: its
       gradients and update, and the reported loss, `L(p, x; W + r)`, are
       those of the perturbed model (dropout on); then `r` is removed.

    bert4keras trains a second model on unlabeled batches next to the
    supervised one (the same layers, compiled with `"kld"`, `Adam(1e-5)`),
    which reads here as `model_vat = keras.Model(model.inputs,
    model.outputs)`, compiled, then this function on it, and one step of
    `model_vat` after each supervised batch: pass
    `keras_attn.training.InterleavedTraining(model_vat, unlabeled)` to the
    supervised model's `fit` (a callback calling `model_vat.train_on_batch`
    itself, as the script does, fails on JAX, whose `fit` keeps the shared
    weights outside the variables; see `InterleavedTraining`), or alternate
    `model.train_on_batch` and `model_vat.train_on_batch` in a loop. Any
    labels given are ignored (`fit(x)` needs none); sample weights weight
    the loss. The weight of this term against the supervised loss is the
    second model's own optimizer (its learning rate), as in the script.
    The script's positional call, `virtual_adversarial_training(model_vat,
    "Embedding-Token")` (its arguments are `model, embedding_name, epsilon,
    xi, iters`), is read in that order when the second argument names a
    layer of `model`.

    Each step computes the model's predictions once and its loss
    `iterations + 1` times. The change lives on this model instance (its
    `train_step`, and its `compute_loss` takes the predictions as the
    targets of a batch without labels, so `evaluate(x)` reports 0);
    `compile` may come before or after, and `.keras` files do
    not store it.

    Args:
        model: a compiled (or later compiled) `keras.Model` with a
            trainable embedding layer.
        epsilon: the norm of the perturbation `r`, a number >= 0.
        xi: the norm of the probe `d` of the power iteration, a number > 0.
        iterations: the power iteration's steps, an int >= 0 (0: `r` is a
            random direction).
        embedding_layer: the name of the layer whose `embeddings` table is
            perturbed (the builder's `"Embedding-Token"`).
        seed: an int: the random directions are reproducible.

    Returns:
        `model`.

    Raises:
        ValueError: a bad `epsilon`, `xi` or `iterations`, a model without
            that layer, a layer without a trainable `embeddings` table, or a
            model already set up for (virtual) adversarial training.

    Example:

    ```python
    model_vat = keras.Model(model.inputs, model.outputs)
    model_vat.compile(optimizer=keras.optimizers.Adam(1e-5), loss="kl_divergence")
    keras_attn.training.virtual_adversarial_training(model_vat, epsilon=1.0, xi=10.0)
    model.fit(train, epochs=3, callbacks=[
        keras_attn.training.InterleavedTraining(model_vat, unlabeled_batches)
    ])
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
    """The perturbation `r` of the embedding table that
    `virtual_adversarial_training` trains `model` at for the batch `x`
    (its steps 1 to 3), at the current weights.

    Args:
        model: a compiled `keras.Model` (its loss is the divergence `L`).
        x: the inputs of one batch.
        direction: the starting probe `d`, an array the shape of the
            table; `None`: drawn from a standard normal.
        epsilon, xi, iterations, embedding_layer: as in
            `virtual_adversarial_training`.
        sample_weight: per-row weights of the loss, or `None`.
        seed: an int, for the drawn `direction`.

    Returns:
        `r`, a numpy array the shape of the embedding table, of norm
        `epsilon` (up to the `1e-8` of the normalisation).

    Example:

    ```python
    r = keras_attn.training.virtual_adversarial_perturbation(model, token_ids)
    most_sensitive_rows = np.argsort(-np.linalg.norm(r, axis=-1))[:5]
    ```
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
    """Batches without labels (`fit(x)`, and Keras' symbolic build of the
    loss before the first step) take the predictions as their targets."""

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
    """Steps 2 and 3 from the probe `direction`, at the current variable
    values (a `StatelessScope`'s on JAX): the power iteration of the
    loss's curvature around the table."""
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
