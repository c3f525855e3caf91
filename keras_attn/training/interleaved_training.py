"""`InterleavedTraining`: a second model's step after each batch of `fit`,
on every backend (bert4keras trains its VAT model from a callback)."""

import keras


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
            in between, so a `DataGenerator` reshuffles).

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
        self.second_model = second_model
        self.data = data
        self._batches = None

    def on_train_batch_end(self, batch, logs=None):
        # JAX's fit: the weights are in its state, not in the variables.
        sync = getattr(self.model, "jax_state_sync", None)
        if sync is not None:
            sync()
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(self._next_batch())
        self.second_model.train_on_batch(x, y, sample_weight=sample_weight)

    def _next_batch(self):
        if self._batches is not None:
            batch = next(self._batches, None)
            if batch is not None:
                return batch
            # A new pass: a PyDataset reshuffles, as after an epoch of fit.
            if hasattr(self.data, "on_epoch_end"):
                self.data.on_epoch_end()
        self._batches = iter(self.data)
        batch = next(self._batches, None)
        if batch is None:
            raise ValueError("InterleavedTraining: `data` holds no batch.")
        return batch
