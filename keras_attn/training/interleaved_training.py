"""`InterleavedTraining`: a second model's step after each batch of `fit`,
on every backend (bert4keras trains its VAT model from a callback)."""

import numbers

import keras
import numpy as np


class InterleavedTraining(keras.callbacks.Callback):
    """After each batch that `fit` trains, one `train_on_batch` of
    `second_model` on the next batch of `data`; the two models may share
    layers, and each step sees the other's updates, on every backend.

    bert4keras's VAT script trains `model_vat` (the classifier's layers,
    compiled with `"kld"`) by calling `model_vat.train_on_batch` in a
    callback of the classifier's `fit`. On TensorFlow and torch that works
    as written. On JAX, `fit` keeps the weights outside the variables
    between its steps (its compiled step is stateless; it empties the
    variables while it runs), so the second model found no values
    ("'NoneType' object is not callable") and `fit` would have
    overwritten its update. This callback first writes `fit`'s weights back
    (`jax_state_sync`, Keras' own way for a callback to read them), then
    trains `second_model`, whose update `fit` reads back before its next
    step. Elsewhere it is the plain call.

    Args:
        second_model: a compiled `keras.Model`, e.g. `keras.Model(
            model.inputs, model.outputs)` with
            `keras_attn.training.virtual_adversarial_training` applied.
        data: the second model's batches, as `fit` reads a batch (`x`, or
            a tuple `(x,)`, `(x, y)` or `(x, y, sample_weight)`, by Keras'
            rule: a pair is inputs and targets): any iterable, e.g. a list
            of arrays, a generator or a `keras_attn.preprocessing.
            DataGenerator`; iterated again from its start when it runs out
            (bert4keras's `forfit()`; a `PyDataset`'s `on_epoch_end` runs
            in between, so a `DataGenerator` reshuffles). One batch (an
            array, a dict of arrays, a tuple `(x, y)`) is not `data`: pass
            `[batch]` to train on it at every step. A generator runs once:
            it must not end before `fit` does (or never end).

    Raises:
        TypeError: `second_model` is not a `keras.Model`.
        ValueError: `data` is not an iterable of batches (one batch, a
            number, a string) or is empty; and, during `fit`, a batch of
            `data` that is not a batch as `fit` reads one, or a generator
            that ran out (each message names `InterleavedTraining` and
            `data`, and says what was expected and found).

    Example:

    ```python
    model_vat = keras.Model(model.inputs, model.outputs)
    model_vat.compile(optimizer=keras.optimizers.Adam(1e-5), loss="kl_divergence")
    keras_attn.training.virtual_adversarial_training(model_vat, epsilon=1.0, xi=10.0)
    model.fit(train, epochs=3,
              callbacks=[keras_attn.training.InterleavedTraining(model_vat, unlabeled)])
    ```
    """

    def __init__(self, second_model, data):
        super().__init__()
        if not isinstance(second_model, keras.Model):
            raise TypeError(
                "InterleavedTraining: `second_model` must be a compiled keras.Model; "
                f"received {type(second_model).__name__}."
            )
        check_data(data)
        self.second_model = second_model
        self.data = data
        self._batches = None
        # Batches taken from the current pass over `data`.
        self._taken = 0

    def on_train_batch_end(self, batch, logs=None):
        # JAX's fit: the weights are in its state, not in the variables.
        sync = getattr(self.model, "jax_state_sync", None)
        if sync is not None:
            sync()
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(self._next_batch())
        self.second_model.train_on_batch(x, y, sample_weight=sample_weight)

    def _next_batch(self):
        if self._batches is not None:
            batch = next(self._batches, _END)
            if batch is not _END:
                return self._checked(batch)
            # A new pass: a PyDataset reshuffles, as after an epoch of fit.
            if hasattr(self.data, "on_epoch_end"):
                self.data.on_epoch_end()
        first_pass = self._batches is None
        given = self._taken
        self._batches, self._taken = iter(self.data), 0
        batch = next(self._batches, _END)
        if batch is _END:
            if self._batches is self.data and not first_pass:
                raise ValueError(
                    f"InterleavedTraining: `data` is a {type(self.data).__name__} (an "
                    f"iterator), which ran out after {given} batch(es) and cannot start "
                    "again; pass a list of batches, a keras_attn.preprocessing."
                    "DataGenerator or a keras.utils.PyDataset (iterated again when they "
                    "run out), or a generator that never ends (bert4keras's `forfit()`)."
                )
            if self._batches is self.data:
                raise ValueError(
                    f"InterleavedTraining: `data` is a {type(self.data).__name__} (an "
                    "iterator) that was already exhausted before its first batch; pass "
                    "a fresh one, or a list of batches."
                )
            raise ValueError(
                f"InterleavedTraining: `data` ({type(self.data).__name__}) holds no batch."
            )
        return self._checked(batch)

    def _checked(self, batch):
        """`batch` as `fit` reads a batch, or a ValueError naming the
        callback, `data` and the batch's place in the pass."""
        self._taken += 1
        if isinstance(batch, list):
            batch = tuple(batch)
        if isinstance(batch, tuple):
            inputs = batch[0] if batch else None
            if not 1 <= len(batch) <= 3:
                found = f"a {len(batch)}-element sequence"
            elif _is_inputs(inputs):
                return batch
            else:
                found = f"a sequence whose `x` is {_shown(inputs)}"
        elif _is_inputs(batch):
            return batch
        else:
            found = _shown(batch)
        raise ValueError(
            f"InterleavedTraining: batch {self._taken} of `data` must be a batch as `fit` "
            "reads one: `x` (an array or tensor, or a dict or list of them), `(x,)`, "
            f"`(x, y)` or `(x, y, sample_weight)`; found {found}."
        )


# What `next` returns once an iterator runs out (a batch may be None).
_END = object()


def check_data(data):
    """Raises a ValueError naming `InterleavedTraining` and `data` unless
    `data` is an iterable of batches: not one batch (an array, a dict of
    arrays, a tuple `(x, y)`, which `fit` reads as one batch) and not a
    scalar or a string, and not empty where its length says so."""
    what = (
        "an iterable of batches (a list of batches, a generator, a keras_attn."
        "preprocessing.DataGenerator or a keras.utils.PyDataset)"
    )
    if hasattr(data, "shape") or isinstance(data, (dict, tuple)):
        raise ValueError(
            f"InterleavedTraining: `data` must be {what}; received {_shown(data)}, which "
            "`fit` reads as one batch (iterating it would give its rows or keys); to "
            "train on one batch again and again, pass it in a list: `[batch]`."
        )
    if isinstance(data, (str, bytes)) or not (
        hasattr(data, "__iter__") or hasattr(data, "__getitem__")
    ):
        raise ValueError(f"InterleavedTraining: `data` must be {what}; received {_shown(data)}.")
    try:
        empty = len(data) == 0
    except TypeError:
        empty = False
    if empty:
        raise ValueError(
            f"InterleavedTraining: `data` must be {what}; received an empty "
            f"{type(data).__name__}, which holds no batch."
        )


def _is_inputs(value):
    """Whether `value` can be a model's `x`: not None, a number, a string or
    an empty container (anything else is left to the model to read)."""
    if value is None or isinstance(value, (numbers.Number, str, bytes, np.bool_)):
        return False
    return not (isinstance(value, (dict, list, tuple)) and not value)


def _shown(value):
    if hasattr(value, "shape"):
        return f"a {type(value).__name__} of shape {tuple(value.shape)}"
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(str, value))}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} element(s)"
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{shown} ({type(value).__name__})"
