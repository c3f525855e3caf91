"""virtual_adversarial_training: bert4keras's power iteration and step,
re-derived in numpy on a model small enough to differentiate by hand."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.training import adversarial_training
from keras_attn.training import virtual_adversarial_perturbation
from keras_attn.training import virtual_adversarial_training
from tests.harness import supports_jit, to_numpy

VOCAB, WIDTH = 7, 3
LEARNING_RATE = 0.5
RNG = np.random.default_rng(5)
TOKENS = RNG.integers(0, VOCAB, size=(4, 5)).astype("int32")


def tiny_model(classes, jit_compile=False):
    """Embedding -> mean over tokens -> Dense -> softmax, KL divergence."""
    keras.utils.set_random_seed(classes)
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(
        VOCAB, WIDTH, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5),
        name="Embedding-Token",
    )(tokens)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    outputs = keras.layers.Dense(
        # A kernel of scale 1: gradients well above bert4keras's 1e-8.
        classes, activation="softmax",
        kernel_initializer=keras.initializers.RandomNormal(stddev=1.0),
        bias_initializer="random_normal",
    )(pooled)
    model = keras.Model(tokens, outputs)
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE), loss="kl_divergence",
        jit_compile=jit_compile,
    )
    return model


def weights(model):
    return [to_numpy(w).astype(np.float64) for w in model.trainable_weights]


def softmax(logits):
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def kl_and_gradients(tokens, target, table, kernel, bias):
    """Keras' `kl_divergence` of `target` and the model's predictions,
    averaged over rows, and its gradients for the weights (float64)."""
    count, length = tokens.shape
    pooled = table[tokens].mean(axis=1)
    predicted = softmax(pooled @ kernel + bias)
    loss = np.mean(np.sum(target * np.log(target / predicted), axis=-1))
    d_logits = (predicted - target) / count
    d_pooled = d_logits @ kernel.T
    d_table = np.zeros_like(table)
    for row in range(count):
        for token in tokens[row]:
            d_table[token] += d_pooled[row] / length
    return loss, (d_table, pooled.T @ d_logits, d_logits.sum(axis=0))


def normalized(x):
    return x / (np.sqrt(np.sum(x**2)) + 1e-8)


def bert4keras_perturbation(tokens, table, kernel, bias, direction, epsilon, xi, iterations):
    """The script's loop: the probe's gradient, `iterations` times, then
    `epsilon` times its direction."""
    target = softmax(table[tokens].mean(axis=1) @ kernel + bias)
    for _ in range(iterations):
        probe = xi * normalized(direction)
        _, (direction, _, _) = kl_and_gradients(tokens, target, table + probe, kernel, bias)
    return epsilon * normalized(direction), target


@pytest.mark.parametrize("iterations", [1, 3])
def test_perturbation_equals_the_power_iteration_in_numpy(iterations):
    model = tiny_model(classes=3)
    direction = np.random.default_rng(0).normal(size=(VOCAB, WIDTH))
    actual = virtual_adversarial_perturbation(
        model, TOKENS, direction, epsilon=0.8, xi=2.0, iterations=iterations
    )
    expected, _ = bert4keras_perturbation(
        TOKENS, *weights(model), direction, epsilon=0.8, xi=2.0, iterations=iterations
    )
    # float32: q - p of nearby predictions loses digits; |r| = 0.8.
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(actual), 0.8, rtol=1e-5)
    # It is not the starting direction: the iteration moved it.
    assert not np.allclose(normalized(actual), normalized(direction), atol=1e-2)


def test_zero_iterations_is_the_random_direction():
    model = tiny_model(classes=3)
    direction = np.random.default_rng(1).normal(size=(VOCAB, WIDTH))
    actual = virtual_adversarial_perturbation(model, TOKENS, direction, epsilon=0.3, iterations=0)
    np.testing.assert_allclose(actual, 0.3 * normalized(direction), rtol=1e-5, atol=1e-7)


def test_one_step_trains_on_the_predictions_at_the_perturbed_table():
    """One row and two classes: the probe's gradient lies along one fixed
    direction u of the table whatever the random start, so the step's
    perturbation is +-epsilon u / (|u| + 1e-8); the step must be numpy's for one of
    the two signs (its gradients at W + r, the update, r removed), and its
    loss the KL divergence there, > 0."""
    model = tiny_model(classes=2, jit_compile=supports_jit())
    row = TOKENS[:1]
    before = weights(model)
    virtual_adversarial_training(model, epsilon=3.0, xi=10.0, iterations=1, seed=3)
    logs = model.train_on_batch(row, return_dict=True)
    table, kernel, bias = before
    u, target = bert4keras_perturbation(
        row, table, kernel, bias, np.ones_like(table), epsilon=3.0, xi=10.0, iterations=1
    )
    candidates = []
    for r in (u, -u):
        loss, gradients = kl_and_gradients(row, target, table + r, kernel, bias)
        candidates.append(
            (loss, [w - LEARNING_RATE * g for w, g in zip(before, gradients)])
        )
    assert not np.allclose(candidates[0][1][1], candidates[1][1][1], atol=1e-3)
    distances = [
        max(np.max(np.abs(a - e)) for a, e in zip(weights(model), expected))
        for _, expected in candidates
    ]
    expected_loss, expected = candidates[int(np.argmin(distances))]
    for actual, wanted in zip(weights(model), expected):
        np.testing.assert_allclose(actual, wanted, atol=2e-6, rtol=1e-4)
    assert expected_loss > 1e-4
    np.testing.assert_allclose(logs["loss"], expected_loss, rtol=1e-3)


def test_epsilon_zero_trains_on_the_predictions_without_change():
    """With r = 0 the targets are the predictions themselves: the KL
    divergence and its gradients are zero, nothing moves."""
    model = tiny_model(classes=3, jit_compile=supports_jit())
    before = weights(model)
    virtual_adversarial_training(model, epsilon=0.0, seed=0)
    history = model.fit(TOKENS, batch_size=2, epochs=1, verbose=0, shuffle=False)
    assert abs(history.history["loss"][0]) < 1e-6
    for actual, wanted in zip(weights(model), before):
        np.testing.assert_allclose(actual, wanted, atol=1e-6)


@pytest.mark.slow  # a compiled fit of a whole model: about 20 s on TF and JAX
def test_builder_classifier_fits_on_unlabeled_batches():
    config = dict(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=8, max_position_embeddings=8, type_vocab_size=1)
    backbone = keras_attn.build_transformer_model(config)
    first = keras.layers.Lambda(lambda x: x[:, 0])(backbone.output)
    probabilities = keras.layers.Dense(2, activation="softmax")(first)
    model = keras.Model(backbone.inputs, probabilities)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="kl_divergence",
                  jit_compile=supports_jit())
    virtual_adversarial_training(model, seed=0)
    tokens = np.random.default_rng(0).integers(1, 30, size=(4, 6)).astype("int32")
    table = to_numpy(model.get_layer("Embedding-Token").embeddings).copy()
    history = model.fit(tokens, batch_size=2, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    assert all(loss > 0 for loss in history.history["loss"])
    assert not np.allclose(to_numpy(model.get_layer("Embedding-Token").embeddings), table)


def test_bert4keras_positional_call_reads_its_order():
    """Issue 34, item 18: the script's `virtual_adversarial_training(model,
    "Embedding-Token")` (its arguments: model, embedding_name, epsilon, xi,
    iters) was "`epsilon` must be a number >= 0". Read in bert4keras's
    order, it is the keyword call's step."""
    calls = [
        (("Embedding-Token",), dict(embedding_layer="Embedding-Token")),
        (("Embedding-Token", 2.0, 5.0, 2), dict(epsilon=2.0, xi=5.0, iterations=2)),
    ]
    steps = []
    for positional, keywords in calls:
        pair = []
        for arguments, options in ((positional, {}), ((), keywords)):
            model = tiny_model(classes=3)
            virtual_adversarial_training(model, *arguments, seed=0, **options)
            model.train_on_batch(TOKENS)
            pair.append(weights(model))
        for a, b in zip(*pair):
            np.testing.assert_array_equal(a, b)
        steps.append(pair[0])
    # The two calls differ: the positional epsilon, xi and iters are read.
    assert not np.allclose(steps[0][0], steps[1][0])
    with pytest.raises(TypeError, match=r"\['epsilon'\] given both positionally"):
        virtual_adversarial_training(tiny_model(classes=3), "Embedding-Token", 1.0, epsilon=2.0)
    with pytest.raises(ValueError, match="`epsilon` must be a number >= 0; received 'Embedding'"):
        virtual_adversarial_training(tiny_model(classes=3), "Embedding")


def test_errors_name_what_is_wrong():
    model = tiny_model(classes=3)
    with pytest.raises(ValueError, match="no layer named 'Embedding-Word'"):
        virtual_adversarial_training(model, embedding_layer="Embedding-Word")
    with pytest.raises(ValueError, match="`xi` must be a number > 0; received 0"):
        virtual_adversarial_training(model, xi=0)
    with pytest.raises(ValueError, match="`iterations` must be an int >= 0; received 1.5"):
        virtual_adversarial_training(model, iterations=1.5)
    with pytest.raises(ValueError, match=r"`direction` must have the table's shape \(7, 3\)"):
        virtual_adversarial_perturbation(model, TOKENS, np.ones((3, 7)))
    adversarial_training(model)
    with pytest.raises(ValueError, match="already trains with method='fgm'"):
        virtual_adversarial_training(model)
