"""embedding_gradients and integrated_gradients on a tiny builder classifier:
gradients against central finite differences taken through the embedding
table, attributions against integrated gradients' completeness with the
baseline computed by zeroing the table."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.training import embedding_gradients
from keras_attn.training import integrated_gradients
from tests.harness import to_numpy

VOCAB, CLASSES = 40, 3
RNG = np.random.default_rng(21)
# Row 1 repeats token 7: its gradients are per occurrence, not per row of the table.
TOKENS = np.array([[2, 9, 7, 7, 30, 4], [5, 11, 23, 7, 0, 0]], dtype="int32")


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(21)
    config = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=8, type_vocab_size=1,
                  initializer_range=0.5)
    backbone = keras_attn.build_transformer_model(config)
    first = keras.layers.Lambda(lambda x: x[:, 0])(backbone.output)
    # Logits: softmax probabilities of a random model saturate, and their
    # change from the baseline is too small to check completeness on.
    logits = keras.layers.Dense(
        CLASSES, kernel_initializer=keras.initializers.RandomNormal(stddev=0.3)
    )(first)
    return keras.Model(backbone.inputs, logits)


def scores(model, table):
    """Each row's class scores with the token table set to `table`."""
    embeddings = model.get_layer("Embedding-Token").embeddings
    saved = to_numpy(embeddings)
    embeddings.assign(table.astype("float32"))
    try:
        return to_numpy(model(TOKENS, training=False)).astype(np.float64)
    finally:
        embeddings.assign(saved)


def test_gradients_equal_central_differences(model):
    """For a direction V on the table, row b's score moves at the rate
    sum over positions t of g[b, t] . V[token(b, t)]."""
    table = to_numpy(model.get_layer("Embedding-Token").embeddings).astype(np.float64)
    targets = np.array([0, 2])
    gradients, embedded = embedding_gradients(model, TOKENS, targets)
    np.testing.assert_allclose(embedded, table[TOKENS], rtol=1e-6)

    def central_difference(direction, step):
        up = scores(model, table + step * direction)[[0, 1], targets]
        down = scores(model, table - step * direction)[[0, 1], targets]
        return (up - down) / (2 * step)

    for seed in range(3):
        direction = np.random.default_rng(seed).normal(size=table.shape)
        # Richardson's extrapolation of two steps: an error of order step**4,
        # so a step large enough for float32's rounding (1e-3 of it, 1e-2).
        numeric = (
            4 * central_difference(direction, 5e-3) - central_difference(direction, 1e-2)
        ) / 3
        analytic = np.einsum("btw,btw->b", gradients, direction[TOKENS])
        np.testing.assert_allclose(analytic, numeric, rtol=1e-3, atol=3e-4)


def test_gradients_at_a_scale_are_those_of_the_scaled_table(model):
    """`scale` evaluates the gradient at `scale * e`: the gradient with the
    table scaled, as bert4keras's script gets it."""
    table = to_numpy(model.get_layer("Embedding-Token").embeddings).astype(np.float64)
    scaled, _ = embedding_gradients(model, TOKENS, 1, scale=0.3)
    embeddings = model.get_layer("Embedding-Token").embeddings
    embeddings.assign((0.3 * table).astype("float32"))
    try:
        at_scaled_table, _ = embedding_gradients(model, TOKENS, 1)
    finally:
        embeddings.assign(table.astype("float32"))
    np.testing.assert_allclose(scaled, at_scaled_table, rtol=1e-4, atol=1e-5 * np.abs(scaled).max())
    unscaled, _ = embedding_gradients(model, TOKENS, 1)
    assert not np.allclose(unscaled, scaled, atol=1e-4)


def test_integrated_gradients_add_up_to_the_change_from_the_baseline(model):
    table = to_numpy(model.get_layer("Embedding-Token").embeddings).astype(np.float64)
    target = 1
    change = scores(model, table)[:, target] - scores(model, np.zeros_like(table))[:, target]
    assert np.all(np.abs(change) > 1e-2)  # a change worth attributing
    attributions = integrated_gradients(model, TOKENS, target, steps=32)
    assert attributions.shape == TOKENS.shape + (16,)
    np.testing.assert_allclose(attributions.sum(axis=(1, 2)), change, rtol=1e-2, atol=1e-3)
    # A single midpoint is much further off: the test can tell the rule.
    one_step = integrated_gradients(model, TOKENS, target, steps=1).sum(axis=(1, 2))
    assert np.max(np.abs(one_step - change)) > 10 * np.max(
        np.abs(attributions.sum(axis=(1, 2)) - change)
    )


def test_a_callable_target_scores_each_row(model):
    by_index, _ = embedding_gradients(model, TOKENS, [2, 0])
    by_callable, _ = embedding_gradients(
        model, TOKENS, lambda outputs: keras.ops.stack([outputs[0, 2], outputs[1, 0]])
    )
    np.testing.assert_allclose(by_callable, by_index, rtol=1e-5, atol=1e-7)


def test_errors_name_what_is_wrong(model):
    with pytest.raises(ValueError, match="no layer named 'Embedding-Word'"):
        embedding_gradients(model, TOKENS, 0, embedding_layer="Embedding-Word")
    with pytest.raises(ValueError, match="index the output's 3 classes; received 3"):
        embedding_gradients(model, TOKENS, 3)
    with pytest.raises(ValueError, match="`steps` must be an int >= 1; received 0"):
        integrated_gradients(model, TOKENS, 0, steps=0)
    tied = keras_attn.build_transformer_model(
        dict(vocab_size=VOCAB, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=8, max_position_embeddings=8, type_vocab_size=1),
        application="mlm",
    )
    with pytest.raises(ValueError, match=r"indexes a \(batch, classes\) output"):
        embedding_gradients(tied, TOKENS, 0)
