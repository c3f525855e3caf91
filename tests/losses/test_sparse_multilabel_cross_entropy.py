import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers.dot_product_attention import large_negative
from tests.harness import supports_jit, to_numpy

RNG = np.random.default_rng(17)


def numpy_loss(positive, scores):
    """log(1 + sum_P exp(-s)) + log(1 + sum_{not P} exp(s)) for one row,
    `positive` a boolean vector over the classes counted (float64)."""
    scores = scores.astype("float64")
    return np.log1p(np.exp(-scores[positive]).sum()) + np.log1p(np.exp(scores[~positive]).sum())


def test_dense_form_matches_numpy():
    scores = RNG.normal(size=(4, 3, 7)).astype("float32") * 3
    labels = (RNG.random((4, 3, 7)) < 0.3).astype("float32")
    labels[0, 0] = 0  # no positive
    labels[0, 1] = 1  # all positive
    loss = to_numpy(keras_attn.losses.multilabel_categorical_crossentropy(labels, scores))
    expected = np.zeros((4, 3))
    for index in np.ndindex(4, 3):
        expected[index] = numpy_loss(labels[index] > 0, scores[index])
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


@pytest.mark.parametrize("mask_zero", [True, False])
def test_sparse_form_matches_the_dense_one(mask_zero):
    classes = 9
    scores = RNG.normal(size=(5, classes)).astype("float32") * 2
    ids = np.array([[3, 5, 0], [1, 0, 0], [0, 0, 0], [8, 2, 4], [6, 0, 0]])
    if not mask_zero:
        ids = np.array([[3, 5, 0], [1, 7, 2], [4, 8, 6], [8, 2, 4], [6, 0, 1]])
    loss = keras_attn.losses.SparseMultilabelCrossEntropy(mask_zero=mask_zero, reduction=None)
    values = to_numpy(loss(ids, scores))
    for row in range(5):
        positive = np.zeros(classes, bool)
        positive[ids[row]] = True
        counted = np.ones(classes, bool)
        if mask_zero:
            positive[0] = counted[0] = False
        expected = numpy_loss(positive[counted], scores[row][counted])
        np.testing.assert_allclose(values[row], expected, rtol=1e-5, err_msg=f"row {row}")
    assert np.isfinite(values).all()


def span_case():
    """GlobalPointer-shaped logits, masked as the layer masks them (padding
    of sample 1 and end < start), and span labels padded with (0, 0);
    sample 1 has no entity at all."""
    logits = RNG.normal(size=(2, 2, 5, 5)).astype("float32") * 2
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    keep = mask[:, None, :, None] & mask[:, None, None, :] & np.triu(np.ones((5, 5), bool))
    logits = np.where(keep, logits, large_negative("float32")).astype("float32")
    spans = np.zeros((2, 2, 3, 2), "int32")
    spans[0, 0, :2] = [[1, 2], [3, 3]]
    spans[0, 1, 0] = [2, 4]
    return logits, spans


def test_span_labels_match_dense_global_pointer_labels():
    logits, spans = span_case()
    loss = to_numpy(
        keras_attn.losses.SparseMultilabelCrossEntropy(span_labels=True, reduction=None)(spans, logits)
    )
    expected = np.zeros(2)
    for b, a in np.ndindex(2, 2):
        positive = np.zeros((5, 5), bool)
        for start, end in spans[b, a]:
            if (start, end) != (0, 0):
                positive[start, end] = True
        counted = np.ones((5, 5), bool)
        counted[0, 0] = False
        expected[b] += numpy_loss(positive[counted], logits[b, a][counted])
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    assert np.isfinite(loss).all()
    # The all-padding sample scores only its negatives: masked spans add 0.
    assert loss[1] < loss[0]


def test_span_loss_trains_global_pointer_compiled():
    inputs = keras.Input((5, 6))
    model = keras.Model(inputs, keras_attn.layers.GlobalPointer(heads=2, head_size=4)(inputs))
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=keras_attn.losses.SparseMultilabelCrossEntropy(span_labels=True),
        jit_compile=supports_jit(),
    )
    # Positions one-hot, so where the spans are can be learnt.
    noise = RNG.normal(size=(8, 5, 1)).astype("float32")
    features = np.concatenate([noise, np.broadcast_to(np.eye(5, dtype="float32"), (8, 5, 5))], -1)
    spans = np.zeros((8, 2, 2, 2), "int32")
    spans[:, 0, 0] = [1, 2]
    spans[:, 1, 0] = [3, 4]
    history = model.fit(features, spans, batch_size=8, epochs=20, verbose=0).history["loss"]
    assert np.isfinite(history).all() and history[-1] < 0.5 * history[0], history
    logits = model.predict(features, verbose=0)
    assert (logits[:, 0, 1, 2] > 0).all() and (logits[:, 1, 3, 4] > 0).all()


def test_config_round_trip():
    loss = keras_attn.losses.SparseMultilabelCrossEntropy(mask_zero=False, span_labels=True)
    config = loss.get_config()
    assert config["mask_zero"] is False and config["span_labels"] is True
    clone = keras_attn.losses.SparseMultilabelCrossEntropy.from_config(config)
    assert clone.get_config() == config
