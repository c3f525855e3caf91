import keras
import numpy as np

import keras_attn
from tests.harness import supports_jit, to_numpy


def classifier(checkpoint_dir):
    encoder = keras_attn.build_transformer_model(checkpoint_dir, dropout_rate=0.1)
    first_token = encoder.output[:, 0]
    probabilities = keras.layers.Dense(2, activation="softmax", name="Classifier")(first_token)
    return keras.Model(encoder.input, probabilities)


def dataset(count=256, length=10, seed=0):
    """Label 1 when token 7 occurs in the sequence; padded to `length`."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(8, 99, size=(count, length)).astype("int32")
    labels = rng.integers(0, 2, size=count)
    for row in range(count):
        if labels[row]:
            tokens[row, rng.integers(1, 6)] = 7
        tokens[row, rng.integers(6, length + 1):] = 0
    return {"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}, labels


def test_classifier_fine_tunes_with_fit_and_reloads(hf_bert_dir, tmp_path):
    keras.utils.set_random_seed(0)
    model = classifier(hf_bert_dir)
    model.compile(
        optimizer=keras.optimizers.AdamW(
            keras.optimizers.schedules.PolynomialDecay(3e-3, 60, 3e-4),
            gradient_accumulation_steps=2,
        ),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=supports_jit(),
    )
    inputs, labels = dataset()
    history = model.fit(inputs, labels, batch_size=32, epochs=15, verbose=0)
    losses = history.history["loss"]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0], losses
    test_inputs, test_labels = dataset(count=64, seed=1)
    predictions = model.predict(test_inputs, verbose=0)
    assert (predictions.argmax(-1) == test_labels).mean() >= 0.75

    path = str(tmp_path / "classifier.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(
        to_numpy(restored.predict(test_inputs, verbose=0)), to_numpy(predictions)
    )
