"""Keras' EMA (`use_ema=True` with `SwapEMAWeights`) on builder models, the
recipe docs/bert4keras.md gives for bert4keras's
`extend_with_exponential_moving_average`, through `fit`, a callback that
predicts and saves at each epoch's end, and a second `fit`.

On JAX, Keras 3.15.1 leaves each weight and its average holding one array
after the last epoch (`SwapEMAWeights`) and after `fit`
(`finalize_variable_values`); a compiled `predict` then deleted the
average's array and `save_weights` failed with "Array has been deleted"."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.preprocessing import DataGenerator
from tests.harness import to_numpy

VOCAB = 50
TINY = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=8,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


class PredictThenSave(keras.callbacks.Callback):
    """An evaluation callback as bert4keras's examples write them: predict
    the validation data, then save the weights, at every epoch's end."""

    def __init__(self, inputs, directory):
        super().__init__()
        self.inputs = inputs
        self.directory = directory
        self.saved = []

    def on_epoch_end(self, epoch, logs=None):
        self.model.predict(self.inputs, verbose=0)
        path = str(self.directory / f"epoch{epoch}.weights.h5")
        self.model.save_weights(path)
        self.saved.append((path, [to_numpy(weight) for weight in self.model.weights]))


def data(count=8, length=6):
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, VOCAB, size=(count, length)).astype("int32")
    inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}
    return inputs, rng.integers(0, 2, size=count)


def classifier():
    keras.utils.set_random_seed(0)
    encoder = keras_attn.build_transformer_model(TINY)
    probabilities = keras.layers.Dense(2, activation="softmax")(encoder.output[:, 0])
    model = encoder.with_outputs(probabilities)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-2, use_ema=True, ema_momentum=0.5),
        loss="sparse_categorical_crossentropy",
    )
    return model


@pytest.mark.parametrize("swap_first", [True, False], ids=["swap-first", "swap-last"])
def test_ema_fit_with_predicting_and_saving_callback(swap_first, tmp_path):
    model = classifier()
    inputs, labels = data()
    saver = PredictThenSave(inputs, tmp_path)
    swap = keras.callbacks.SwapEMAWeights(swap_on_epoch=True)
    callbacks = [swap, saver] if swap_first else [saver, swap]
    # From a PyDataset, as the failing GlobalPointer training.
    examples = [
        ({name: values[row] for name, values in inputs.items()}, labels[row])
        for row in range(len(labels))
    ]
    train = DataGenerator(examples, batch_size=4, seed=0)
    model.fit(train, epochs=2, callbacks=callbacks, verbose=0)
    assert len(saver.saved) == 2

    # Keras' contract: after fit the weights are their moving averages.
    averages = model.optimizer._model_variables_moving_average
    for weight, average in zip(model.trainable_weights, averages):
        np.testing.assert_array_equal(to_numpy(weight), to_numpy(average))

    # After fit: predict, save, and train again.
    model.predict(inputs, verbose=0)
    model.save_weights(str(tmp_path / "after.weights.h5"))
    history = model.fit(inputs, labels, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])

    # Each file written in the callback holds what the model held then.
    for path, weights in saver.saved:
        model.load_weights(path)
        for weight, expected in zip(model.weights, weights):
            np.testing.assert_array_equal(to_numpy(weight), expected)
