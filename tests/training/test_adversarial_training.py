"""adversarial_training: one step of each method equals a numpy reference
(analytic gradients for FGM, finite differences for the penalty)."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.training import adversarial_training
from tests.harness import supports_jit, to_numpy

VOCAB, WIDTH, OUT = 7, 3, 2
LEARNING_RATE = 0.5
RNG = np.random.default_rng(3)
TOKENS = RNG.integers(0, VOCAB, size=(4, 5)).astype("int32")
TARGETS = RNG.normal(size=(4, OUT)).astype("float32")


def tiny_model(jit_compile):
    """Embedding -> mean over tokens -> Dense, MSE: small enough for numpy."""
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(
        VOCAB, WIDTH, embeddings_initializer="random_normal", name="Embedding-Token"
    )(tokens)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    outputs = keras.layers.Dense(OUT, bias_initializer="random_normal")(pooled)
    model = keras.Model(tokens, outputs)
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE), loss="mse", jit_compile=jit_compile
    )
    return model


def numpy_loss_and_gradients(table, kernel, bias):
    """MSE and its gradients for the weights, written out by hand (float64)."""
    count, length = TOKENS.shape
    pooled = table[TOKENS].mean(axis=1)
    error = pooled @ kernel + bias - TARGETS
    loss = np.mean(error**2)
    d_output = 2 * error / error.size
    d_pooled = d_output @ kernel.T
    d_table = np.zeros_like(table)
    for row in range(count):
        for token in TOKENS[row]:
            d_table[token] += d_pooled[row] / length
    return loss, (d_table, pooled.T @ d_output, d_output.sum(axis=0))


def weights(model):
    return [to_numpy(w).astype(np.float64) for w in model.trainable_weights]


def fgm_reference(table, kernel, bias, epsilon):
    _, (d_table, _, _) = numpy_loss_and_gradients(table, kernel, bias)
    delta = epsilon * d_table / (np.sqrt(np.sum(d_table**2)) + 1e-8)
    loss, gradients = numpy_loss_and_gradients(table + delta, kernel, bias)
    return loss, [w - LEARNING_RATE * g for w, g in zip((table, kernel, bias), gradients)]


def penalty_reference(table, kernel, bias, epsilon, step=1e-6):
    def total(parameters):
        loss, (d_table, _, _) = numpy_loss_and_gradients(*parameters)
        return loss + 0.5 * epsilon * np.sum(d_table**2)

    parameters = [table, kernel, bias]
    updated = []
    for which, value in enumerate(parameters):
        gradient = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            shifted = [p.copy() for p in parameters]
            shifted[which][index] += step
            up = total(shifted)
            shifted[which][index] -= 2 * step
            gradient[index] = (up - total(shifted)) / (2 * step)
        updated.append(value - LEARNING_RATE * gradient)
    return total(parameters), updated


@pytest.mark.parametrize(
    "method, epsilon",
    [("fgm", 0.7), ("fgm", 0.0), ("gradient_penalty", 2.0)],
)
def test_one_step_equals_the_numpy_reference(method, epsilon):
    model = tiny_model(supports_jit())
    before = weights(model)
    adversarial_training(model, method=method, epsilon=epsilon)
    logs = model.train_on_batch(TOKENS, TARGETS, return_dict=True)
    reference = fgm_reference if method == "fgm" else penalty_reference
    expected_loss, expected = reference(*before, epsilon)
    for actual, wanted in zip(weights(model), expected):
        np.testing.assert_allclose(actual, wanted, atol=2e-6, rtol=1e-4)
    np.testing.assert_allclose(logs["loss"], expected_loss, rtol=1e-4)


def test_bert4keras_positional_call_is_fgm_on_that_layer():
    """bert4keras's `adversarial_training(model, embedding_name, epsilon)`:
    the same step as `method="fgm", embedding_layer=...`; the layer name
    once read as `method` raised "must be one of"."""
    keyword, positional, plain = (tiny_model(supports_jit()) for _ in range(3))
    positional.set_weights(keyword.get_weights())
    plain.set_weights(keyword.get_weights())
    adversarial_training(keyword, method="fgm", epsilon=0.7, embedding_layer="Embedding-Token")
    adversarial_training(positional, "Embedding-Token", 0.7)
    for model in (keyword, positional, plain):
        model.train_on_batch(TOKENS, TARGETS)
    for a, b in zip(weights(keyword), weights(positional)):
        np.testing.assert_array_equal(b, a)
    # And it is not the plain step.
    assert not np.allclose(weights(plain)[1], weights(positional)[1])


def test_epsilon_zero_is_the_plain_step():
    plain, adversarial = tiny_model(supports_jit()), tiny_model(supports_jit())
    adversarial.set_weights(plain.get_weights())
    adversarial_training(adversarial, epsilon=0.0)
    for model in (plain, adversarial):
        model.fit(TOKENS, TARGETS, batch_size=2, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(weights(plain), weights(adversarial)):
        np.testing.assert_allclose(b, a, atol=1e-7)


@pytest.mark.slow  # compiled fits of a whole model: about 40 s each on TF and JAX
@pytest.mark.parametrize("method", ["fgm", "gradient_penalty"])
def test_builder_model_fits_with_each_method(method):
    config = dict(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=8, max_position_embeddings=8, type_vocab_size=1)
    model = keras_attn.build_transformer_model(config, application="mlm")
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras_attn.TokenCrossEntropy(),
        jit_compile=supports_jit(),
    )
    adversarial_training(model, method=method, epsilon=0.5)
    tokens = np.random.default_rng(0).integers(1, 30, size=(2, 6)).astype("int32")
    table = to_numpy(model.get_layer("Embedding-Token").embeddings).copy()
    history = model.fit(tokens, tokens, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert not np.allclose(to_numpy(model.get_layer("Embedding-Token").embeddings), table)


def attention_model(fused_attention):
    """Embedding -> self-attention (no dropout: the fused kernel where the
    backend has one, unless `fused_attention=False`) -> mean -> Dense."""
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(
        VOCAB, 4, embeddings_initializer="random_normal", name="Embedding-Token"
    )(tokens)
    attended = keras_attn.MultiHeadAttention(
        2, 2, fused_attention=fused_attention, name="attention"
    )(embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(attended)
    outputs = keras.layers.Dense(OUT)(pooled)
    model = keras.Model(tokens, outputs)
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE), loss="mse", jit_compile=supports_jit()
    )
    return model


def test_gradient_penalty_through_fused_attention_equals_the_einsum_path():
    """Issue 34, item 14: the penalty differentiates a gradient, and torch's
    flash kernel has no second derivative ("derivative for
    aten::_scaled_dot_product_flash_attention_for_cpu_backward is not
    implemented" with dropout 0). The step must run, and equal the same
    step through the einsum path (`fused_attention=False`)."""
    fused, einsum, plain = attention_model(None), attention_model(False), attention_model(None)
    einsum.set_weights(fused.get_weights())
    plain.set_weights(fused.get_weights())
    for model in (fused, einsum):
        adversarial_training(model, method="gradient_penalty", epsilon=2.0)
    losses = [
        model.train_on_batch(TOKENS, TARGETS, return_dict=True)["loss"]
        for model in (fused, einsum)
    ]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    for actual, wanted in zip(weights(fused), weights(einsum)):
        np.testing.assert_allclose(actual, wanted, atol=1e-6)
    # The penalty is in the step: it differs from the plain one.
    plain.train_on_batch(TOKENS, TARGETS)
    assert not np.allclose(weights(plain)[0], weights(fused)[0], atol=1e-6)


def test_errors_name_what_is_wrong():
    model = tiny_model(False)
    with pytest.raises(ValueError, match="no layer named 'Embedding-Word'"):
        adversarial_training(model, embedding_layer="Embedding-Word")
    with pytest.raises(ValueError, match="`method` must be one of.*received 'pgd'"):
        adversarial_training(model, method="pgd")
    with pytest.raises(ValueError, match="`epsilon` must be a number >= 0; received -1"):
        adversarial_training(model, epsilon=-1)
    model.get_layer("Embedding-Token").trainable = False
    with pytest.raises(ValueError, match="no trainable `embeddings` table"):
        adversarial_training(model)
    model.get_layer("Embedding-Token").trainable = True
    adversarial_training(model)
    with pytest.raises(ValueError, match="already trains with method='fgm'"):
        adversarial_training(model, method="gradient_penalty")
