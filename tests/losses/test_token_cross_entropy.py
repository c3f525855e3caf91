import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import BACKEND, supports_jit, to_numpy

RNG = np.random.default_rng(7)
VOCAB = 6


def numpy_loss(labels, logits, ignore_id):
    """Mean of -log softmax(logits)[label] over the labels that are not ignored."""
    logits = logits.astype("float64")
    log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    total, count = 0.0, 0
    for position in np.ndindex(labels.shape):
        if labels[position] != ignore_id:
            total -= log_probabilities[position + (labels[position],)]
            count += 1
    return total / max(count, 1)


def padded_labels(ignore_id):
    labels = RNG.integers(1, VOCAB, size=(3, 5))
    labels[0, 3:] = ignore_id
    labels[2, 1:] = ignore_id
    return labels


@pytest.mark.parametrize("ignore_id", [0, -100])
def test_loss_matches_numpy_reference_with_padding(ignore_id):
    labels = padded_labels(ignore_id)
    logits = RNG.normal(size=(3, 5, VOCAB)).astype("float32")
    loss = keras_attn.TokenCrossEntropy(ignore_id=ignore_id)(labels, logits)
    np.testing.assert_allclose(float(to_numpy(loss)), numpy_loss(labels, logits, ignore_id), rtol=1e-5)
    # Probabilities instead of logits: the same number.
    probabilities = to_numpy(keras.ops.softmax(logits))
    loss = keras_attn.TokenCrossEntropy(ignore_id=ignore_id, from_logits=False)(labels, probabilities)
    np.testing.assert_allclose(float(to_numpy(loss)), numpy_loss(labels, logits, ignore_id), rtol=1e-4)


@pytest.mark.parametrize("bad_label", [-100, VOCAB, -1, 2.5])
def test_out_of_contract_label_is_reported_eagerly(bad_label):
    labels = padded_labels(0).astype("float32")
    labels[1, 2] = bad_label
    logits = RNG.normal(size=(3, 5, VOCAB)).astype("float32")
    expected = f"label {bad_label} at position \\(1, 2\\).*ignore_id=0.*\\[0, {VOCAB}\\)"
    with pytest.raises(ValueError, match=expected):
        keras_attn.TokenCrossEntropy(ignore_id=0)(labels, logits)


def test_labels_must_match_the_prediction_shape():
    logits = RNG.normal(size=(3, 5, VOCAB)).astype("float32")
    with pytest.raises(ValueError, match=r"y_true shape \(3, 4\)"):
        keras_attn.TokenCrossEntropy()(padded_labels(0)[:, :4], logits)
    # Keras' trailing axis of 1 is accepted.
    labels = padded_labels(0)
    np.testing.assert_allclose(
        float(to_numpy(keras_attn.TokenCrossEntropy()(labels[..., None], logits))),
        numpy_loss(labels, logits, 0),
        rtol=1e-5,
    )


@pytest.mark.parametrize("ignore_id", [[0, -100], None, 1.5, True])
def test_ignore_id_must_be_one_integer(ignore_id):
    with pytest.raises(ValueError, match="`ignore_id` must be an integer"):
        keras_attn.TokenCrossEntropy(ignore_id=ignore_id)


def token_model():
    ids = keras.Input((5,), dtype="int32")
    logits = keras.layers.Embedding(VOCAB, VOCAB)(ids)
    model = keras.Model(ids, logits)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0),
        jit_compile=supports_jit(),
    )
    return model


def test_fit_step_reports_the_reference_loss():
    model = token_model()
    ids = RNG.integers(0, VOCAB, size=(3, 5)).astype("int32")
    labels = padded_labels(0)
    logits = to_numpy(model(ids))
    history = model.fit(ids, labels, batch_size=3, epochs=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(history.history["loss"][0], numpy_loss(labels, logits, 0), rtol=1e-5)


@pytest.mark.parametrize("bad_label", [-100, VOCAB])
def test_fit_step_never_silently_miscounts(bad_label):
    """Traced steps (TF graph / XLA, JAX jit) cannot see label values while
    tracing: the loss is NaN. Torch's fit step runs eagerly and raises."""
    model = token_model()
    ids = RNG.integers(0, VOCAB, size=(3, 5)).astype("int32")
    labels = padded_labels(0)
    labels[2, 3] = bad_label
    if BACKEND == "torch":
        with pytest.raises(ValueError, match=f"label {bad_label} at position \\(2, 3\\)"):
            model.fit(ids, labels, batch_size=3, epochs=1, verbose=0, shuffle=False)
    else:
        history = model.fit(ids, labels, batch_size=3, epochs=1, verbose=0, shuffle=False)
        assert np.isnan(history.history["loss"][0])


def test_config_round_trip():
    loss = keras_attn.TokenCrossEntropy(ignore_id=-100, from_logits=False)
    restored = keras_attn.TokenCrossEntropy.from_config(loss.get_config())
    assert (restored.ignore_id, restored.from_logits) == (-100, False)
