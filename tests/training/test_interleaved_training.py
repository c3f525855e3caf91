"""InterleavedTraining: bert4keras's VAT recipe (a second model sharing the
classifier's layers, one step of it after each supervised batch of `fit`)
equals alternating `train_on_batch` calls, on every backend (issue 34,
item 19: the script's own callback failed on JAX)."""

import keras
import numpy as np
import pytest

from keras_attn.training import InterleavedTraining
from keras_attn.training import virtual_adversarial_training
from tests.harness import supports_jit, to_numpy

VOCAB, WIDTH, CLASSES = 9, 4, 3
RNG = np.random.default_rng(7)
TOKENS = RNG.integers(0, VOCAB, size=(4, 5)).astype("int32")
LABELS = RNG.integers(0, CLASSES, size=(4,)).astype("int32")
UNLABELED = [RNG.integers(0, VOCAB, size=(2, 5)).astype("int32") for _ in range(3)]


def models():
    """A classifier and bert4keras's `model_vat` on the same layers."""
    keras.utils.set_random_seed(0)
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(VOCAB, WIDTH, name="Embedding-Token")(tokens)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    outputs = keras.layers.Dense(CLASSES, activation="softmax")(pooled)
    model = keras.Model(tokens, outputs)
    model.compile(
        optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy",
        jit_compile=supports_jit(),
    )
    model_vat = keras.Model(model.input, model.output)
    model_vat.compile(
        optimizer=keras.optimizers.SGD(0.5), loss="kl_divergence", jit_compile=supports_jit()
    )
    virtual_adversarial_training(model_vat, epsilon=0.5, seed=0)
    return model, model_vat


def weights(model):
    return [to_numpy(w) for w in model.trainable_weights]


def test_fit_with_interleaved_steps_equals_alternating_train_on_batch():
    model, model_vat = models()
    start = model.get_weights()
    # Two epochs of two batches: four VAT steps, the third pass over
    # UNLABELED starting again from its first batch.
    model.fit(
        TOKENS, LABELS, batch_size=2, epochs=2, shuffle=False, verbose=0,
        callbacks=[InterleavedTraining(model_vat, UNLABELED)],
    )

    reference, reference_vat = models()
    reference.set_weights(start)
    unlabeled = iter(UNLABELED + UNLABELED)
    for _ in range(2):
        for index in range(2):
            rows = slice(2 * index, 2 * index + 2)
            reference.train_on_batch(TOKENS[rows], LABELS[rows])
            reference_vat.train_on_batch(next(unlabeled))

    for actual, expected in zip(weights(model), weights(reference)):
        np.testing.assert_allclose(actual, expected, atol=1e-6)
    # The VAT steps are in it: without them the weights differ.
    plain, _ = models()
    plain.set_weights(start)
    plain.fit(TOKENS, LABELS, batch_size=2, epochs=2, shuffle=False, verbose=0)
    assert not np.allclose(weights(plain)[0], weights(model)[0], atol=1e-5)


def test_errors_name_what_is_wrong():
    with pytest.raises(TypeError, match="compiled keras.Model; received function"):
        InterleavedTraining(lambda x: x, UNLABELED)
    _, model_vat = models()
    x, y = UNLABELED[0], np.zeros((2, CLASSES), "float32")
    for data, found in (
        (3, r"received 3 \(int\)\.$"),
        ("batches", r"received 'batches' \(str\)\.$"),
        ([], r"received an empty list, which holds no batch"),
        # One batch, which `fit` would read as a batch and iteration splits.
        ({"token_ids": x}, r"received a dict with keys \['token_ids'\], which `fit` reads as "
                           r"one batch.*`\[batch\]`"),
        ((x, y), r"received a tuple of 2 element\(s\), which `fit` reads as one batch"),
        (x, r"received a ndarray of shape \(2, 5\), which `fit` reads as one batch"),
    ):
        with pytest.raises(ValueError, match=r"InterleavedTraining: `data` must be an iterable "
                           r"of batches .*" + found):
            InterleavedTraining(model_vat, data)


def test_bad_batches_and_a_spent_generator_are_named_at_the_step():
    """Checked where `fit` reaches them (a generator's batches are not known
    before): the step's callback names the batch and what it found, and a
    generator that ran out says so, instead of "`data` holds no batch"."""
    model, model_vat = models()
    steps = [InterleavedTraining(model_vat, [UNLABELED[0], 7])]
    steps.append(InterleavedTraining(model_vat, (batch for batch in UNLABELED[:1])))
    spent = (batch for batch in UNLABELED)
    list(spent)
    steps.append(InterleavedTraining(model_vat, spent))
    for step in steps:
        step.set_model(model)
    steps[0].on_train_batch_end(0)
    with pytest.raises(ValueError, match=r"InterleavedTraining: batch 2 of `data` must be a "
                       r"batch as `fit` reads one: .*; found 7 \(int\)"):
        steps[0].on_train_batch_end(1)
    steps[1].on_train_batch_end(0)
    with pytest.raises(ValueError, match=r"InterleavedTraining: `data` is a generator \(an "
                       r"iterator\), which ran out after 1 batch\(es\) and cannot start again"):
        steps[1].on_train_batch_end(1)
    with pytest.raises(ValueError, match=r"`data` is a generator \(an iterator\) that was "
                       r"already exhausted before its first batch"):
        steps[2].on_train_batch_end(0)
