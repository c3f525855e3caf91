import itertools

import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import BACKEND, check_config_round_trip, supports_jit, to_numpy

RNG = np.random.default_rng(11)
LABELS = 3


def brute_force(emissions, transitions, labels, valid):
    """log Z, the score of `labels` and the best path of one row, by listing
    every label sequence over the real positions `valid` (float64)."""
    real = np.flatnonzero(valid)

    def score(path):
        total = sum(emissions[t, y] for t, y in zip(real, path))
        return total + sum(transitions[a, b] for a, b in zip(path[:-1], path[1:]))

    paths = list(itertools.product(range(LABELS), repeat=len(real)))
    scores = np.array([score(p) for p in paths])
    log_partition = np.log(np.exp(scores - scores.max()).sum()) + scores.max() if len(real) else 0.0
    best = np.zeros(len(valid), "int64")
    best[real] = paths[int(np.argmax(scores))]
    return log_partition, score(tuple(labels[real])), best


def crf_with_transitions(transitions, lr_multiplier=1):
    crf = keras_attn.layers.ConditionalRandomField(lr_multiplier=lr_multiplier)
    crf.build((None, None, LABELS))
    crf.set_weights([transitions / lr_multiplier])
    return crf


def test_likelihood_and_viterbi_against_all_paths():
    """Rows with 0 to 4 real positions (lengths 1-4 by post padding), pre
    padding and a hole, in one batch (one compilation on JAX)."""
    length = 4
    valid = np.array(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0], [0, 1, 1, 1],
         [1, 0, 1, 1], [0, 0, 0, 1]],
        bool,
    )
    batch = len(valid)
    emissions = RNG.normal(size=(batch, length, LABELS)).astype("float32") * 2
    transitions = RNG.normal(size=(LABELS, LABELS)).astype("float32")
    labels = RNG.integers(0, LABELS, size=(batch, length))
    labels[~valid] = 7  # anything: padding labels are ignored
    crf = crf_with_transitions(transitions, lr_multiplier=2)
    np.testing.assert_allclose(to_numpy(crf.transitions), transitions, rtol=1e-6)
    nll = to_numpy(crf.negative_log_likelihood(labels, emissions, mask=valid))
    # The padding marks written by the layer carry the same mask.
    marked = crf(emissions, mask=valid)
    nll_from_marks = to_numpy(crf.negative_log_likelihood(labels, marked))
    paths = to_numpy(crf.decode(emissions, mask=valid))
    paths_from_marks = to_numpy(crf.decode(marked))
    for row in range(batch):
        log_partition, score, best = brute_force(
            emissions[row].astype("float64"), transitions.astype("float64"), labels[row], valid[row]
        )
        np.testing.assert_allclose(nll[row], log_partition - score, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(nll_from_marks[row], log_partition - score, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(paths[row], best)
        np.testing.assert_array_equal(paths_from_marks[row], best)
    np.testing.assert_allclose(to_numpy(crf.loss(labels, marked)), nll, rtol=1e-6)
    predicted = emissions.argmax(-1)
    expected_accuracy = (predicted == labels)[valid].mean()
    np.testing.assert_allclose(float(to_numpy(crf.accuracy(labels, marked))), expected_accuracy, rtol=1e-6)


@pytest.mark.parametrize("starts, ends", [([0], [0]), ([1, 2], None), (None, [2])])
def test_decode_with_starts_and_ends_against_all_allowed_paths(starts, ends):
    """bert4keras's `ViterbiDecoder(trans, starts, ends)`: the best path
    among those whose first real label is in `starts` and last in `ends`,
    for rows with pre padding, post padding, a hole and one real position."""
    valid = np.array([[1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 1], [0, 0, 1, 0]], bool)
    emissions = RNG.normal(size=(len(valid), 4, LABELS)).astype("float32") * 3
    transitions = RNG.normal(size=(LABELS, LABELS)).astype("float32")
    crf = crf_with_transitions(transitions)
    paths = to_numpy(crf.decode(emissions, mask=valid, starts=starts, ends=ends))
    constrained = 0
    for row in range(len(valid)):
        real = np.flatnonzero(valid[row])
        best, best_score = None, -np.inf
        for path in itertools.product(range(LABELS), repeat=len(real)):
            if (starts is not None and path[0] not in starts) or (
                ends is not None and path[-1] not in ends
            ):
                continue
            score = sum(emissions[row, t, y] for t, y in zip(real, path)) + sum(
                transitions[a, b] for a, b in zip(path[:-1], path[1:])
            )
            if score > best_score:
                best, best_score = path, score
        expected = np.zeros(4, "int64")
        expected[real] = best
        np.testing.assert_array_equal(paths[row], expected)
        unconstrained = brute_force(emissions[row], transitions, np.zeros(4, int), valid[row])[2]
        constrained += not np.array_equal(unconstrained, expected)
    assert constrained > 0  # the constraint changed some row's best path
    with pytest.raises(ValueError, match=r"`starts` must be label ids in \[0, num_labels=3\)"):
        crf.decode(emissions, mask=valid, starts=[3])
    with pytest.raises(ValueError, match="`ends` must be label ids"):
        crf.decode(emissions, mask=valid, ends=[])


def test_log_partition_is_stable_for_large_scores():
    emissions = np.array([[[400.0, 0.0, -400.0], [0.0, 500.0, 0.0]]], "float32")
    transitions = np.zeros((LABELS, LABELS), "float32")
    crf = crf_with_transitions(transitions)
    nll = to_numpy(crf.negative_log_likelihood(np.array([[0, 1]]), emissions))
    assert np.isfinite(nll).all() and abs(nll[0]) < 1e-3


def tagging_model(crf):
    inputs = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, 8, mask_zero=True)(inputs)
    emissions = keras.layers.Dense(LABELS)(x)
    return keras.Model(inputs, crf(emissions)), inputs


def tagging_data():
    """Label = token id mod 3, except that a 1 after a 2 is always 0: a rule
    the transitions help with. Token 0 is padding."""
    tokens = RNG.integers(1, 20, size=(64, 6))
    tokens[::3, 4:] = 0
    labels = tokens % LABELS
    return tokens.astype("int32"), labels


def test_fit_lowers_the_loss_and_decoding_runs_in_compiled_predict():
    crf = keras_attn.layers.ConditionalRandomField(lr_multiplier=10)
    model, inputs = tagging_model(crf)
    model.compile(
        optimizer=keras.optimizers.Adam(0.05), loss=crf.loss, metrics=[crf.accuracy],
        jit_compile=supports_jit(),
    )
    tokens, labels = tagging_data()
    history = model.fit(tokens, labels, batch_size=32, epochs=4, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0], history["loss"]
    assert history["accuracy"][-1] > 0.8, history["accuracy"]
    decoder = keras.Model(inputs, crf.decode(model.output))
    decoder.compile(jit_compile=supports_jit())
    paths = decoder.predict(tokens, batch_size=32, verbose=0)
    emissions = model.predict(tokens, batch_size=32, verbose=0)
    np.testing.assert_array_equal(paths, to_numpy(crf.decode(emissions)))
    np.testing.assert_array_equal(paths[tokens == 0], 0)
    # Padding travels in the output: the same loss as with an explicit mask.
    nll = to_numpy(crf.negative_log_likelihood(labels, emissions))
    unmarked = np.where(tokens[..., None] == 0, 0.0, emissions)
    np.testing.assert_allclose(
        nll, to_numpy(crf.negative_log_likelihood(labels, unmarked, mask=tokens != 0)), rtol=1e-5
    )


def test_lr_multiplier_scales_the_step_of_the_transitions():
    """One SGD step moves the effective transitions lr_multiplier**2 as far."""
    emissions = RNG.normal(size=(8, 4, LABELS)).astype("float32")
    labels = RNG.integers(0, LABELS, size=(8, 4))
    transitions = RNG.normal(size=(LABELS, LABELS)).astype("float32")
    steps = {}
    for multiplier in (1, 3):
        crf = crf_with_transitions(transitions, lr_multiplier=multiplier)
        inputs = keras.Input((4, LABELS))
        model = keras.Model(inputs, crf(inputs))
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate=1e-3),
            loss=crf.loss,
        )
        model.fit(emissions, labels, batch_size=8, epochs=1, verbose=0)
        steps[multiplier] = to_numpy(crf.transitions) - transitions
    assert np.abs(steps[1]).max() > 1e-5
    np.testing.assert_allclose(steps[3], 9 * steps[1], rtol=2e-3, atol=1e-7)


@pytest.mark.parametrize("label", [-1, 3, -100, 1.5])
def test_labels_outside_num_labels_are_refused_naming_them(label):
    emissions = RNG.normal(size=(2, 4, LABELS)).astype("float32")
    valid = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    crf = crf_with_transitions(RNG.normal(size=(LABELS, LABELS)).astype("float32"))
    labels = RNG.integers(0, LABELS, size=(2, 4)).astype(type(label))
    bad = labels.copy()
    bad[1, 2] = label
    calls = (
        lambda: crf.negative_log_likelihood(bad, emissions, mask=valid),
        lambda: crf.negative_log_likelihood(bad, crf(emissions, mask=valid)),
        lambda: crf.loss(bad, crf(emissions, mask=valid)),
    )
    for call in calls:
        with pytest.raises(ValueError) as raised:
            call()
        message = str(raised.value)
        assert f"label {label} at position (1, 2)" in message, message
        assert "num_labels=3" in message and "padding" in message
    # (batch, length, 1) labels name the same position.
    with pytest.raises(ValueError, match=r"at position \(1, 2\)"):
        crf.negative_log_likelihood(bad[..., None], emissions, mask=valid)
    # At a padding position the label is ignored, whatever it is.
    ignored = labels.copy()
    ignored[0, 3] = label
    np.testing.assert_array_equal(
        to_numpy(crf.negative_log_likelihood(ignored, emissions, mask=valid)),
        to_numpy(crf.negative_log_likelihood(labels, emissions, mask=valid)),
    )


def test_bad_labels_never_give_a_finite_loss_in_evaluate_or_fit():
    """Compiled (TensorFlow, JAX): the batch's loss is NaN and the weights
    stay finite; eager (torch): the error names the label."""
    crf = keras_attn.layers.ConditionalRandomField()
    model, _ = tagging_model(crf)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=crf.loss, jit_compile=supports_jit())
    tokens, labels = tagging_data()
    assert np.isfinite(model.evaluate(tokens, labels, batch_size=64, verbose=0))
    for label in (-1, 3):
        bad = labels.copy()
        bad[5, 1] = label  # a real token (only rows 0, 3, ... end in padding)
        if not supports_jit():
            named = rf"label {label} at position \(5, 1\)"
            with pytest.raises(ValueError, match=named):
                model.evaluate(tokens, bad, batch_size=64, verbose=0)
            with pytest.raises(ValueError, match=named):
                model.fit(tokens, bad, batch_size=64, shuffle=False, verbose=0)
            continue
        assert np.isnan(model.evaluate(tokens, bad, batch_size=64, verbose=0))
        history = model.fit(tokens, bad, batch_size=64, epochs=2, verbose=0).history
        assert np.isnan(history["loss"]).all(), history
        assert all(np.isfinite(to_numpy(weight)).all() for weight in model.weights)
    assert np.isfinite(model.evaluate(tokens, labels, batch_size=64, verbose=0))


def test_layer_conventions(tmp_path):
    """The harness parts that apply to a layer whose weights only the loss
    reads: config round trip, symbolic shapes, .keras saving, mixed precision."""
    check_config_round_trip(keras_attn.layers.ConditionalRandomField, {"lr_multiplier": 4})
    crf = keras_attn.layers.ConditionalRandomField()
    symbolic = crf(keras.KerasTensor((2, 5, LABELS)))
    assert symbolic.shape == (2, 5, LABELS) and symbolic.dtype == "float32"
    decoded = crf.decode(keras.KerasTensor((2, 5, LABELS)))
    assert decoded.shape == (2, 5) and decoded.dtype == "int32"

    crf = keras_attn.layers.ConditionalRandomField(lr_multiplier=4, name="crf")
    model, _ = tagging_model(crf)
    tokens, _ = tagging_data()
    outputs = to_numpy(model(tokens))
    model.save(tmp_path / "crf.keras")
    restored = keras.models.load_model(tmp_path / "crf.keras")
    np.testing.assert_allclose(to_numpy(restored(tokens)), outputs, atol=1e-6)
    restored_crf = restored.get_layer("crf")
    assert restored_crf.lr_multiplier == 4
    np.testing.assert_allclose(to_numpy(restored_crf.transitions), to_numpy(crf.transitions))

    emissions = RNG.normal(size=(4, 5, LABELS)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0]] * 4, bool)
    for policy in ("mixed_float16", "mixed_bfloat16"):
        half = keras_attn.layers.ConditionalRandomField(dtype=policy)
        marked = half(emissions, mask=mask)
        assert keras.backend.standardize_dtype(marked.dtype) == policy.split("_")[1]
        assert np.isfinite(to_numpy(keras.ops.cast(marked, "float32"))).all()
        np.testing.assert_array_equal(to_numpy(half.decode(marked)), to_numpy(half.decode(emissions, mask=mask)))


def test_lr_multiplier_must_be_positive():
    with pytest.raises(ValueError, match="`lr_multiplier` must be a positive number; received 0"):
        keras_attn.layers.ConditionalRandomField(lr_multiplier=0)
