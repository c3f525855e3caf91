import numpy as np
import pytest

import keras_attn
from keras_attn.layers import banded as band_dispatch
from tests.harness import to_numpy

CONFIG = dict(
    vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=64, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.5, type_vocab_size=0,
)
VARIANTS = [
    ("sinusoidal", "mlm"),
    ("roformer", "mlm"),
    ("alibi", "lm"),
    ("alibi", "mlm"),
    ("kerple_log", "lm"),
    ("kerple_power", "mlm"),
    ("sandwich", "lm"),
    ("xpos", "lm"),
]


def tokens(length=12, seed=0):
    return np.random.default_rng(seed).integers(1, 30, size=(2, length)).astype("int32")


@pytest.mark.parametrize("variant, application", VARIANTS)
def test_position_variants_have_no_learned_position_table(variant, application):
    """Fitting and round trips of every variant are the model harness's
    (tests/models/test_variants.py); here, what makes these variants
    extrapolate: no learned absolute table (sinusoidal's is fixed)."""
    model = keras_attn.build_transformer_model(CONFIG, variant=variant, application=application)
    names = {layer.name for layer in model.layers}
    if variant == "sinusoidal":
        assert isinstance(model.get_layer("Embedding-Position"), keras_attn.layers.SinusoidalPositionEmbedding)
    else:
        assert "Embedding-Position" not in names
    assert model.input_contract.max_length is None


def test_relative_variants_accept_longer_sequences_than_trained():
    model = keras_attn.build_transformer_model(CONFIG, variant="roformer")
    long = to_numpy(model({"token_ids": tokens(length=200)}))
    assert long.shape == (2, 200, 16) and np.all(np.isfinite(long))


def test_roformer_is_shift_invariant():
    """Relative positions only: a sequence shifted right behind masked
    padding gives the same outputs (absolute positions would not)."""
    model = keras_attn.build_transformer_model(CONFIG, variant="roformer", padding_mask_input=True)
    ids = tokens(length=8)
    mask = np.ones_like(ids)
    shifted = np.concatenate([np.full((2, 3), 5, "int32"), ids], axis=1)
    shifted_mask = np.concatenate([np.zeros((2, 3), "int32"), mask], axis=1)
    base = to_numpy(model({"token_ids": ids, "padding_mask": mask}))
    moved = to_numpy(model({"token_ids": shifted, "padding_mask": shifted_mask}))[:, 3:]
    np.testing.assert_allclose(moved, base, atol=1e-4)
    sinusoidal = keras_attn.build_transformer_model(CONFIG, variant="sinusoidal", padding_mask_input=True)
    base = to_numpy(sinusoidal({"token_ids": ids, "padding_mask": mask}))
    moved = to_numpy(sinusoidal({"token_ids": shifted, "padding_mask": shifted_mask}))[:, 3:]
    assert np.abs(moved - base).max() > 1e-3


@pytest.mark.parametrize("application, reach", [("encoder", lambda d, w, L: abs(d) <= L * (w // 2)), ("lm", lambda d, w, L: 0 <= d < L * (w - 1) + 1)])
def test_receptive_field_of_stacked_windows(application, reach, tmp_path):
    window, layers, length = 4, 2, 16
    trained = keras_attn.build_transformer_model(CONFIG, variant="roformer", application=application)
    path = str(tmp_path / "roformer.weights.h5")
    trained.save_weights(path)
    # The same weights with the LocalMaskBaseline switched on at inference.
    model = keras_attn.build_transformer_model(
        CONFIG, path, variant="roformer", application=application, attention_window=window
    )
    ids = tokens(length=length)[:1]
    base = to_numpy(model({"token_ids": ids}))
    for j in range(length):
        changed = ids.copy()
        changed[0, j] = 29 if ids[0, j] != 29 else 28
        moved = np.abs(to_numpy(model({"token_ids": changed})) - base).max(-1)[0] > 1e-5
        expected = np.array([reach(i - j, window, layers) for i in range(length)])
        np.testing.assert_array_equal(moved, expected, err_msg=f"token {j}")
    # Without the window every position sees every token.
    full = to_numpy(trained({"token_ids": ids}))
    assert not np.allclose(full, base, atol=1e-5)


def test_roformer_rotates_a_decoupled_key_size():
    model = keras_attn.build_transformer_model(CONFIG, variant="roformer", attention_key_size=12)
    attention = model.get_layer("Transformer-0-MultiHeadSelfAttention")
    assert attention.key_size == 12 and attention.head_size == 8
    assert attention.position_encoding == "rotary"
    assert np.all(np.isfinite(to_numpy(model({"token_ids": tokens()}))))


def test_xpos_is_causal_only():
    with pytest.raises(ValueError, match="lm"):
        keras_attn.build_transformer_model(CONFIG, variant="xpos", application="mlm")


def test_log_n_scaling_is_an_inference_option():
    model = keras_attn.build_transformer_model(CONFIG, variant="roformer", log_n_train_length=8)
    assert model.get_layer("Transformer-1-MultiHeadSelfAttention").log_n_train_length == 8
    plain = keras_attn.build_transformer_model(CONFIG, variant="roformer")
    plain.set_weights(model.get_weights())
    ids = tokens(length=6)
    # Shorter than the training length: the scale is 1 and nothing changes.
    np.testing.assert_allclose(
        to_numpy(model({"token_ids": ids})), to_numpy(plain({"token_ids": ids})), atol=1e-6
    )
    ids = tokens(length=32)
    assert np.abs(to_numpy(model({"token_ids": ids})) - to_numpy(plain({"token_ids": ids}))).max() > 1e-4


def test_xpos_blockwise_attention_option():
    model = keras_attn.build_transformer_model(
        CONFIG, variant="xpos", application="lm", attention_window=4, blockwise_attention=True
    )
    attention = model.get_layer("Transformer-0-MultiHeadSelfAttention")
    assert attention.blockwise_attention and attention.attention_window == 4
    ids = tokens(length=12)[:1]
    base = to_numpy(model({"token_ids": ids}))
    changed = ids.copy()
    changed[0, 2] = 29 if ids[0, 2] != 29 else 28
    moved = np.abs(to_numpy(model({"token_ids": changed})) - base).max(-1)[0] > 1e-5
    # Token 2 (block 0) reaches blocks 0 and 1 in one layer, block 2 in two.
    np.testing.assert_array_equal(moved, [False, False] + [True] * 10)


@pytest.mark.parametrize("application", ["encoder", "mlm", "unilm"])
def test_blockwise_attention_needs_a_causal_application(application):
    with pytest.raises(ValueError, match="`blockwise_attention=True`.*application='lm'"):
        keras_attn.build_transformer_model(
            CONFIG, application=application, attention_window=4, blockwise_attention=True
        )


def test_blockwise_attention_needs_a_window():
    with pytest.raises(ValueError, match="`blockwise_attention=True` needs `attention_window`"):
        keras_attn.build_transformer_model(
            CONFIG, variant="xpos", application="lm", blockwise_attention=True
        )


@pytest.mark.parametrize(
    "variant, application, options",
    [
        ("roformer", "encoder", {}),
        ("roformer", "lm", {}),
        ("xpos", "lm", {"blockwise_attention": True}),
        ("bert", "mlm", {"log_n_train_length": 8}),
        ("alibi", "lm", {}),
        ("kerple_log", "encoder", {}),
        ("sandwich", "mlm", {}),
    ],
)
def test_windowed_models_band_exactly_as_the_dense_mask(variant, application, options, monkeypatch):
    """A model with `attention_window` computes the band on blocks; forcing
    the dense masked path gives the same outputs, padding included."""
    model = keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, attention_window=8, **options
    )
    ids = tokens(length=37)
    ids[1, 30:] = 0
    attention = model.get_layer("Transformer-0-MultiHeadSelfAttention")
    assert band_dispatch.layout_for_call(
        attention.attention_window, attention.blockwise_attention, False,
        ids[..., None], ids[..., None], None, None, None, False,
    )
    banded = to_numpy(model({"token_ids": ids}))
    monkeypatch.setattr(band_dispatch, "layout_for_call", lambda *args: None)
    dense = to_numpy(model({"token_ids": ids}))
    # Logits of a 2-layer model with large weights (up to about 6): float32
    # reordering measures up to 3e-6 of the largest output over seeds, so
    # the bound scales with it; a band error is of the order of the outputs.
    np.testing.assert_allclose(banded, dense, atol=2e-5 * np.abs(dense).max(), rtol=0)
