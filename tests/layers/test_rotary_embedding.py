import numpy as np
import pytest

import keras_attn
from tests import reference
from tests.harness import run_layer_test, to_numpy

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("scale_base", [None, 16])
def test_rotation_matches_the_paper(scale_base):
    query = RNG.normal(size=(2, 7, 3, 8)).astype("float32")
    key = RNG.normal(size=(2, 7, 3, 8)).astype("float32")
    layer = keras_attn.layers.RotaryEmbedding(scale_base=scale_base)
    rotated_query, rotated_key = layer(query, key)
    centre = 7 // 2
    np.testing.assert_allclose(
        to_numpy(rotated_query), reference.rope(query, scale_base=scale_base, centre=centre), atol=1e-5
    )
    np.testing.assert_allclose(
        to_numpy(rotated_key),
        reference.rope(key, scale_base=scale_base, sign=-1.0, centre=centre),
        atol=1e-5,
    )


@pytest.mark.parametrize("scale_base", [None, 16])
def test_rotary_embedding_through_the_harness(scale_base, tmp_path):
    query = RNG.normal(size=(2, 7, 3, 8)).astype("float32")
    key = RNG.normal(size=(2, 5, 3, 8)).astype("float32")
    centre = 5 // 2

    def numpy_reference(layer, inputs):
        return (
            reference.rope(inputs["query"], base=500.0, scale_base=scale_base, centre=centre),
            reference.rope(inputs["key"], base=500.0, scale_base=scale_base, sign=-1.0, centre=centre),
        )

    run_layer_test(
        keras_attn.layers.RotaryEmbedding,
        {"max_wavelength": 500, "scale_base": scale_base},
        inputs={"query": query, "key": key},
        expected_output_shape=[(2, 7, 3, 8), (2, 5, 3, 8)],
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("scale_base", [None, 16])
def test_scores_depend_only_on_relative_position(scale_base):
    length = 9
    vector_q, vector_k = RNG.normal(size=(2, 8))
    query = np.broadcast_to(vector_q, (1, length, 1, 8)).astype("float32")
    key = np.broadcast_to(vector_k, (1, length, 1, 8)).astype("float32")
    rotated_query, rotated_key = keras_attn.layers.RotaryEmbedding(scale_base=scale_base)(query, key)
    scores = to_numpy(rotated_query)[0, :, 0] @ to_numpy(rotated_key)[0, :, 0].T
    for offset in range(-length + 1, length):
        diagonal = np.diagonal(scores, offset)
        np.testing.assert_allclose(diagonal, diagonal[0], rtol=1e-4, atol=1e-5)
    # Not trivially constant: different distances give different scores.
    assert np.abs(scores[0, 0] - scores[5, 0]) > 1e-3


@pytest.mark.parametrize("position", [keras_attn.layers.Rotary(), keras_attn.layers.XPos()],
                         ids=["rotary", "xpos"])
def test_attention_with_rotary_and_wide_keys(position, tmp_path):
    query = RNG.normal(size=(2, 6, 8)).astype("float32")
    scale_base = getattr(position, "scale_base", None)

    def numpy_reference(layer, inputs):
        def rotate(q, k):
            centre = k.shape[1] // 2
            return (
                reference.rope(q, scale_base=scale_base, centre=centre),
                reference.rope(k, scale_base=scale_base, sign=-1.0, centre=centre),
            )

        return reference.attention(layer, inputs["query"], use_causal_mask=True, rotate=rotate)[0]

    run_layer_test(
        keras_attn.MultiHeadAttention,
        {"heads": 2, "head_size": 4, "key_size": 6, "position": position},
        inputs={"query": query},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(2, 6, 8),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_odd_key_size_is_rejected():
    # The attention refuses it when constructed, the layer alone when called.
    with pytest.raises(ValueError, match=r"need an even query/key width d; received key_size=5"):
        keras_attn.MultiHeadAttention(2, 4, key_size=5, position_encoding="rotary")
    odd = RNG.normal(size=(1, 3, 2, 5)).astype("float32")
    with pytest.raises(ValueError, match=r"RotaryEmbedding: key_size .* must be even.*received 5"):
        keras_attn.layers.RotaryEmbedding()(odd, odd)


def test_log_n_scaling_matches_reference(tmp_path):
    train_length, length = 4, 9
    query = RNG.normal(size=(2, length, 8)).astype("float32")
    mask = np.ones((2, length, length), bool)
    mask[1, :, 7:] = False

    def numpy_reference(layer, inputs):
        visible = (inputs["attention_mask"] & np.tril(np.ones((length, length), bool))).sum(-1)
        scale = np.maximum(1.0, np.log(np.maximum(visible, 1)) / np.log(train_length))
        return reference.attention(
            layer, inputs["query"], attention_mask=inputs["attention_mask"],
            use_causal_mask=True, query_scale=scale,
        )[0]

    run_layer_test(
        keras_attn.MultiHeadAttention,
        {"heads": 2, "head_size": 4, "log_n_train_length": train_length},
        inputs={"query": query, "attention_mask": mask},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(2, length, 8),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )
