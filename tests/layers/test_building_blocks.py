"""The builder's building blocks, through the shared harness."""

import ast
import pathlib

import keras
import numpy as np
import pytest
from scipy.special import erf

import keras_attn
from tests.harness import run_layer_test, to_numpy

RNG = np.random.default_rng(7)


def test_feed_forward(tmp_path):
    def numpy_reference(layer, inputs):
        x = inputs["inputs"].astype(np.float64)
        w1, b1 = (to_numpy(v) for v in (layer.intermediate_dense.kernel, layer.intermediate_dense.bias))
        w2, b2 = (to_numpy(v) for v in (layer.output_dense.kernel, layer.output_dense.bias))
        hidden = x @ w1 + b1
        hidden = 0.5 * hidden * (1 + erf(hidden / np.sqrt(2)))  # exact GELU
        return hidden @ w2 + b2

    run_layer_test(
        keras_attn.layers.FeedForward,
        {"intermediate_size": 12, "bias_initializer": "glorot_uniform"},
        inputs={"inputs": RNG.normal(size=(2, 5, 6)).astype("float32")},
        expected_output_shape=(2, 5, 6),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_rms_normalization_carries_the_mask(tmp_path):
    def numpy_reference(layer, inputs):
        x = inputs["x"].astype(np.float64)  # Keras' RMSNormalization names it `x`
        scale = to_numpy(layer.scale)
        return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + 1e-6) * scale

    run_layer_test(
        keras_attn.layers.RMSNormalization,
        {"epsilon": 1e-6},
        inputs={"x": RNG.normal(size=(2, 5, 6)).astype("float32")},
        expected_output_shape=(2, 5, 6),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )
    # Keras' own layer drops the mask; this one passes it on.
    token_ids = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(10, 4, mask_zero=True)(token_ids)
    pooled = keras.layers.GlobalAveragePooling1D()(keras_attn.layers.RMSNormalization()(hidden))
    model = keras.Model(token_ids, pooled)
    ids = np.array([[3, 4, 0, 0]], "int32")
    normed = keras.Model(token_ids, keras_attn.layers.RMSNormalization()(hidden))
    # The normalisation has no weights that differ between the two layers
    # (scale starts at one), so the masked mean of one equals the other's pooling.
    values = to_numpy(normed(ids))
    np.testing.assert_allclose(to_numpy(model(ids)), values[:, :2].mean(axis=1), atol=1e-6)


def test_rms_normalization_with_a_scale_offset_multiplies_by_one_plus_the_scale(tmp_path):
    """Gemma's norm: `x / rms(x) * (1 + w)`, `w` starting at zeros."""
    def numpy_reference(layer, inputs):
        x = inputs["x"].astype(np.float64)
        scale = to_numpy(layer.scale)
        return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + 1e-6) * (1.0 + scale)

    layer = run_layer_test(
        keras_attn.layers.RMSNormalization,
        {"epsilon": 1e-6, "scale_offset": 1.0},
        inputs={"x": RNG.normal(size=(2, 5, 6)).astype("float32")},
        expected_output_shape=(2, 5, 6),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )
    assert layer.scale_offset == 1.0


def test_logit_soft_cap(tmp_path):
    def numpy_reference(layer, inputs):
        return 3.0 * np.tanh(inputs["inputs"].astype(np.float64) / 3.0)

    run_layer_test(
        keras_attn.layers.LogitSoftCap,
        {"cap": 3.0},
        inputs={"inputs": 10 * RNG.normal(size=(2, 5, 6)).astype("float32")},
        expected_output_shape=(2, 5, 6),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )
    with pytest.raises(ValueError, match=r"`cap` must be None or a positive number .*received 0"):
        keras_attn.layers.LogitSoftCap(0)


def test_position_embedding(tmp_path):
    def numpy_reference(layer, inputs):
        return to_numpy(layer.embeddings)[2:7][None]

    run_layer_test(
        keras_attn.layers.PositionEmbedding,
        {"max_position": 9, "dim": 4, "offset": 2},
        inputs={"inputs": RNG.normal(size=(1, 5, 3)).astype("float32")},
        expected_output_shape=(1, 5, 4),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_position_embedding_counts_real_tokens_from_padding():
    layer = keras_attn.layers.PositionEmbedding(8, 3, offset=2, count_from_padding=True)
    padding = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    output = to_numpy(layer(np.zeros((2, 5, 1)), padding_mask=padding))
    table = to_numpy(layer.embeddings)
    # Hugging Face RoBERTa numbering: real tokens 2, 3, ...; padding row 1.
    np.testing.assert_array_equal(output[0], table[[1, 1, 2, 3, 4]])
    np.testing.assert_array_equal(output[1], table[[2, 3, 4, 1, 1]])


def test_the_full_pass_and_a_decoding_step_number_tokens_alike():
    """RoBERTa's numbering and UniLM's orders of a sequence equal those of
    its two halves, the second continuing from the first's counts (what a
    cached step carries), against a loop over the tokens."""
    from keras_attn.layers import masking

    rng = np.random.default_rng(0)
    real = rng.random((3, 9)) < 0.7
    segments = (rng.random((3, 9)) < 0.5).astype("int32")
    expected_positions = np.full((3, 9), -1)
    expected_orders = np.zeros((3, 9), int)
    for row in range(3):
        count = order = 0
        for column in range(9):
            order += segments[row, column]
            expected_orders[row, column] = order
            if real[row, column]:
                expected_positions[row, column] = count
                count += 1
    np.testing.assert_array_equal(to_numpy(masking.real_token_positions(real)), expected_positions)
    np.testing.assert_array_equal(to_numpy(masking.unilm_orders(segments)), expected_orders)
    before_real = real[:, :4].sum(axis=1).astype("int32")
    before_orders = segments[:, :4].sum(axis=1).astype("int32")
    np.testing.assert_array_equal(
        to_numpy(masking.real_token_positions(real[:, 4:], before_real)), expected_positions[:, 4:]
    )
    np.testing.assert_array_equal(
        to_numpy(masking.unilm_orders(segments[:, 4:], before_orders)), expected_orders[:, 4:]
    )


def test_position_embedding_rejects_long_sequences():
    layer = keras_attn.layers.PositionEmbedding(6, 3, offset=2)
    with pytest.raises(ValueError, match="Sequence length 5 exceeds the 4 positions"):
        layer(np.zeros((1, 5, 1)))


def test_token_embedding_reverse_is_the_tied_projection(tmp_path):
    layer = run_layer_test(
        keras_attn.layers.TokenEmbedding,
        {"input_dim": 11, "output_dim": 4},
        inputs={"inputs": RNG.integers(0, 11, size=(2, 5)).astype("int32")},
        expected_output_shape=(2, 5, 4),
        reference=lambda layer, inputs: to_numpy(layer.embeddings)[inputs["inputs"]],
        tmp_path=tmp_path,
    )
    hidden = RNG.normal(size=(2, 3, 4)).astype("float32")
    logits = to_numpy(layer(hidden, reverse=True))
    np.testing.assert_allclose(logits, hidden @ to_numpy(layer.embeddings).T, atol=1e-5)


def test_bias_add(tmp_path):
    run_layer_test(
        keras_attn.layers.BiasAdd,
        {"bias_initializer": "random_normal"},
        inputs={"inputs": RNG.normal(size=(2, 3, 4)).astype("float32")},
        expected_output_shape=(2, 3, 4),
        reference=lambda layer, inputs: inputs["inputs"] + to_numpy(layer.bias),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("mode", ["bidirectional", "unilm"])
@pytest.mark.parametrize("mask_diagonal", [False, True])
def test_attention_mask_modes(mode, mask_diagonal):
    tokens = np.array([[5, 6, 7, 8, 0]], "int32")
    segments = np.array([[0, 0, 1, 1, 0]], "int32")
    layer = keras_attn.layers.AttentionMask(mode, pad_token_id=0, mask_diagonal=mask_diagonal)
    mask = np.broadcast_to(to_numpy(layer(tokens, segment_ids=segments)), (1, 5, 5))[0]
    keys = tokens[0] != 0
    i, j = np.indices((5, 5))
    expected = {
        "bidirectional": np.broadcast_to(keys, (5, 5)),
        # Source (first two) bidirectional; target sees the source and itself causally.
        "unilm": keys[None, :] & ((j < 2) | ((j <= i) & (i >= 2))),
    }[mode]
    if mask_diagonal:
        expected = expected & (i != j)
    np.testing.assert_array_equal(mask, expected)
    restored = keras_attn.layers.AttentionMask.from_config(layer.get_config())
    assert restored.mode == mode


@pytest.mark.parametrize(
    "mode, mask_diagonal, expected_output_shape",
    [("bidirectional", False, (2, 1, 6)), ("unilm", False, (2, 6, 6)), ("bidirectional", True, (2, 6, 6))],
)
def test_attention_mask_through_the_harness(mode, mask_diagonal, expected_output_shape, tmp_path):
    tokens = np.array([[5, 6, 7, 8, 9, 0], [4, 3, 0, 0, 0, 0]], "int32")
    segments = np.array([[0, 0, 0, 1, 1, 0], [0, 1, 0, 0, 0, 0]], "int32")

    def numpy_reference(layer, inputs):
        keys = inputs["token_ids"] != 3  # pad_token_id below
        expected = np.broadcast_to(keys[:, None, :], (2, 6, 6)).copy()
        if mode == "unilm":
            position = np.cumsum(inputs["segment_ids"], axis=1)
            expected &= position[:, None, :] <= position[:, :, None]
        if mask_diagonal:
            expected &= ~np.eye(6, dtype=bool)[None]
        if expected_output_shape[1] == 1:
            expected = expected[:, :1]
        return expected

    run_layer_test(
        keras_attn.layers.AttentionMask,
        {"mode": mode, "pad_token_id": 3, "mask_diagonal": mask_diagonal},
        inputs={"token_ids": tokens, "segment_ids": segments},
        expected_output_shape=expected_output_shape,
        expected_output_dtype="bool",
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


# Base classes users subclass; their subclasses go through the harness
# (e.g. `WindowPenalty` in test_position_biases.py for RelativePositionBias).
BASE_CLASSES = {"RelativePositionBias"}
# Layers the harness cannot take, each with the test that covers the rest.
OUTSIDE_THE_HARNESS = {
    # Its transitions are read only by its loss, so the harness's MSE fit step
    # cannot train them: test_conditional_random_field.py::test_layer_conventions
    # checks config, shapes, .keras saving and mixed precision, and a compiled fit.
    "ConditionalRandomField",
}


def layers_given_to_the_harness():
    """Names of the classes passed as first argument to `run_layer_test` in
    tests/layers/*.py (as `keras_attn.X`, `keras_attn.layers.X` or `X`)."""
    names = set()
    for path in pathlib.Path(__file__).parent.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "run_layer_test"
                and node.args
            ):
                first = node.args[0]
                names.add(first.attr if isinstance(first, ast.Attribute) else first.id)
    return names


def test_every_public_layer_goes_through_the_harness():
    public = {
        name
        for name in dir(keras_attn.layers)
        if isinstance(getattr(keras_attn.layers, name), type)
        and issubclass(getattr(keras_attn.layers, name), keras.layers.Layer)
    }
    missing = sorted(
        public - BASE_CLASSES - OUTSIDE_THE_HARNESS - layers_given_to_the_harness()
    )
    assert not missing, f"public layers with no run_layer_test case in tests/layers: {missing}"
    for name in BASE_CLASSES:
        base = getattr(keras_attn.layers, name)
        assert any(
            issubclass(getattr(keras_attn.layers, other), base) for other in public - {name}
        ), name
