import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import supports_jit, to_numpy

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=16, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.5, mask_token_id=3,
)
TOKENS = np.array([[5, 9, 12, 7, 30, 22, 0, 0]], "int32")


def logits(model, tokens):
    return to_numpy(model({"token_ids": tokens}))


def leaks(model, position, tokens=TOKENS):
    """How much the prediction at `position` moves when its own token changes."""
    changed = tokens.copy()
    changed[0, position] = 17
    return np.abs(logits(model, changed)[0, position] - logits(model, tokens)[0, position]).max()


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_prediction_at_i_ignores_token_i(layers):
    model = keras_attn.build_transformer_model(
        dict(CONFIG, num_hidden_layers=layers), variant="tta", application="mlm"
    )
    base = logits(model, TOKENS)
    for position in range(6):
        assert leaks(model, position) < 1e-5
        # Every other real token does reach position i.
        for other in range(6):
            if other != position:
                changed = TOKENS.copy()
                changed[0, other] = 17
                assert np.abs(logits(model, changed)[0, position] - base[0, position]).max() > 1e-4


def test_naive_deep_key_value_leaks():
    naive = keras_attn.build_transformer_model(
        dict(CONFIG, tta_naive_key_value=True), variant="tta", application="mlm"
    )
    assert max(leaks(naive, position) for position in range(6)) > 1e-3
    one_layer = keras_attn.build_transformer_model(
        dict(CONFIG, tta_naive_key_value=True, num_hidden_layers=1), variant="tta", application="mlm"
    )
    # With one layer the keys/values are still the embeddings: no leak yet.
    assert max(leaks(one_layer, position) for position in range(6)) < 1e-5


def test_without_the_diagonal_mask_the_model_sees_its_token():
    model = keras_attn.build_transformer_model(
        dict(CONFIG, tta_diagonal_mask=False), variant="tta", application="mlm"
    )
    assert leaks(model, 2) > 1e-3


def test_padding_does_not_reach_real_positions():
    model = keras_attn.build_transformer_model(CONFIG, variant="tta", application="mlm")
    changed = TOKENS.copy()
    changed[0, 6:] = [8, 8]
    trimmed = logits(model, TOKENS[:, :6])
    # Different lengths sum in a different order: float32 rounding of logits
    # of size ~4 is ~1e-5, far below what a leak of padding would move.
    np.testing.assert_allclose(logits(model, TOKENS)[0, :6], trimmed[0], atol=1e-4)
    assert np.abs(logits(model, changed)[0, :6] - trimmed[0]).max() > 1e-2


def test_token_cross_entropy_is_the_mean_over_real_tokens():
    rng = np.random.default_rng(0)
    targets = np.array([[4, 7, 0, 0], [5, 6, 2, 0]], "int32")
    predictions = rng.normal(size=(2, 4, 9)).astype("float32")
    loss = float(to_numpy(keras_attn.TokenCrossEntropy(ignore_id=0)(targets, predictions)))
    log_probabilities = predictions - np.log(np.exp(predictions).sum(-1, keepdims=True))
    real = targets != 0
    picked = np.take_along_axis(log_probabilities, targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(loss, -picked[real].mean(), rtol=1e-5)


def test_tta_encoder_trains_and_round_trips(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras_attn.TTAEncoder(
        vocab_size=40, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=24,
        mask_token_id=3, max_position=16, dropout_rate=0.0, attention_dropout_rate=0.0,
    )
    rng = np.random.default_rng(1)
    tokens = rng.integers(4, 40, size=(32, 8)).astype("int32")
    tokens[:, 1::2] = tokens[:, ::2]  # every odd token repeats its neighbour: learnable
    tokens[:8, 6:] = 0
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0),
        jit_compile=supports_jit(),
    )
    history = model.fit({"token_ids": tokens}, tokens, batch_size=16, epochs=25, verbose=0)
    assert history.history["loss"][-1] < 0.75 * history.history["loss"][0], history.history["loss"]
    path = str(tmp_path / "tta.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored, keras_attn.TTAEncoder)
    np.testing.assert_allclose(
        logits(restored, tokens[:2]), logits(model, tokens[:2]), atol=1e-6
    )


def test_tta_needs_a_mask_token():
    config = {k: v for k, v in CONFIG.items() if k != "mask_token_id"}
    with pytest.raises(ValueError, match="mask_token_id"):
        keras_attn.build_transformer_model(config, variant="tta", application="mlm")
