"""`InterleavedTraining`: a second model's step after each batch of `fit`."""

import numbers

import keras
import numpy as np


class InterleavedTraining(keras.callbacks.Callback):
    """After each batch that `fit` trains, one `train_on_batch` of `second_model`
    on the next batch of `data`; the models may share layers (bert4keras's VAT
    script, docs/bert4keras.md). On JAX it first writes `fit`'s weights back
    to the variables (`jax_state_sync`).

    Args:
        second_model: a compiled `keras.Model` (TypeError for another type).
        data: the second model's batches as `fit` reads a batch: any iterable
            (a list, a generator, a `DataGenerator`), iterated again when it
            runs out (a `PyDataset`'s `on_epoch_end` runs in between); one
            batch goes in a list, `[batch]`. A generator must outlast `fit`.

    Raises:
        ValueError: `data` is one batch, a scalar, a string or empty; during
            `fit`, a batch `fit` could not read, or a generator that ran out.

    Example:

    >>> model.fit(train, callbacks=[keras_attn.training.InterleavedTraining(model_vat, unlabeled)])
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
        """`batch` as `fit` reads a batch, or a ValueError naming its place."""
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
    """ValueError naming `InterleavedTraining` unless `data` is a non-empty
    iterable of batches (not one batch, a scalar or a string)."""
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
    """Whether `value` can be a model's `x` (not None, a scalar, a string or an
    empty container)."""
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
