"""GAU-alpha: the structure of ZhuiyiTechnology's `GAU_alpha(RoFormerV2)`
(bert4keras) re-derived in numpy and run on the arrays of a Google-format
checkpoint written here under GAU-alpha's names (its `variable_mapping`),
independently of the library's name table."""

import json
import os
import warnings

import keras
import numpy as np
import pytest

import keras_attn
from tests import reference
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    attention_key_size=12, intermediate_size=24, max_position_embeddings=64,
    hidden_act="swish", type_vocab_size=2, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
EPSILON = 1e-7  # bert4keras's LayerNormalization(zero_mean=False, ...)


def gau_alpha_arrays(config, seed=0):
    """Random arrays under GAU-alpha's checkpoint names."""
    rng = np.random.default_rng(seed)
    hidden, units, key_size = (
        config["hidden_size"], config["intermediate_size"], config["attention_key_size"]
    )

    def random(*shape, scale=0.3):
        return rng.normal(scale=scale, size=shape).astype("float32")

    arrays = {
        "bert/embeddings/word_embeddings": random(config["vocab_size"], hidden),
        "bert/embeddings/token_type_embeddings": random(config["type_vocab_size"], hidden),
        "global_step": np.array(1000, np.int64),
    }
    for layer in range(config["num_hidden_layers"]):
        prefix = f"GAU_alpha/encoder/layer_{layer}/gau/"
        arrays[prefix + "i_dense/kernel"] = random(hidden, 2 * units + key_size)
        arrays[prefix + "q_scaleoffset/gamma"] = 1 + random(key_size)
        arrays[prefix + "k_scaleoffset/gamma"] = 1 + random(key_size)
        arrays[prefix + "o_dense/kernel"] = random(units, hidden)
    return arrays


def gau_alpha_reference(arrays, config, token_ids, segment_ids, mlm):
    """GAU-alpha in float64: `h = RMSNorm(token + segment)`, per block
    `h = RMSNorm(h + GAU(h))` with softmax_plus over the unpadded keys,
    then the tied embedding for the masked-LM logits."""
    units, key_size = config["intermediate_size"], config["attention_key_size"]
    arrays = {name: np.asarray(value, np.float64) for name, value in arrays.items()}
    embeddings = arrays["bert/embeddings/word_embeddings"]

    def norm(x):
        return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + EPSILON)

    hidden = norm(embeddings[token_ids] + arrays["bert/embeddings/token_type_embeddings"][segment_ids])
    keep = (token_ids != 0)[:, None, :]  # the keys every query sees
    n = keep.sum(axis=-1, keepdims=True)
    for layer in range(config["num_hidden_layers"]):
        prefix = f"GAU_alpha/encoder/layer_{layer}/gau/"
        projected = hidden @ arrays[prefix + "i_dense/kernel"]
        projected = projected / (1.0 + np.exp(-projected))  # swish
        u, v, z = np.split(projected, [units, 2 * units], axis=-1)
        q = reference.rope((z * arrays[prefix + "q_scaleoffset/gamma"])[:, :, None])[:, :, 0]
        k = reference.rope((z * arrays[prefix + "k_scaleoffset/gamma"])[:, :, None])[:, :, 0]
        scores = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(key_size)
        scores = scores * np.log(np.maximum(n, 16)) / np.log(512)
        weights = reference.softmax(np.where(keep, scores, -np.inf))
        attended = u * np.einsum("bqk,bkd->bqd", weights, v)
        hidden = norm(hidden + attended @ arrays[prefix + "o_dense/kernel"])
    return hidden @ embeddings.T if mlm else hidden


def inputs():
    rng = np.random.default_rng(1)
    # Longer than softmax_plus's floor of 16 keys, so `n` matters.
    token_ids = rng.integers(5, CONFIG["vocab_size"], size=(2, 22)).astype("int32")
    token_ids[1, 18:] = 0  # padding
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 9:] = 1
    segment_ids[token_ids == 0] = 0
    return token_ids, segment_ids


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    arrays = gau_alpha_arrays(CONFIG)
    directory = tmp_path_factory.mktemp("gau_alpha")
    write_tf_checkpoint(str(directory / "bert_model.ckpt"), arrays)
    (directory / "bert_config.json").write_text(json.dumps(CONFIG))
    return arrays, str(directory)


@pytest.fixture(scope="module")
def mlm_model(checkpoint):
    _, directory = checkpoint
    with warnings.catch_warnings():
        # Every checkpoint weight is used and every model weight is found.
        warnings.simplefilter("error")
        return keras_attn.build_transformer_model(
            os.path.join(directory, "bert_config.json"),
            os.path.join(directory, "bert_model.ckpt"),
            model="gau_alpha",  # bert4keras's spelling
            application="mlm",
        )


def test_checkpoint_model_equals_numpy_gau_alpha(checkpoint, mlm_model):
    arrays, _ = checkpoint
    token_ids, segment_ids = inputs()
    model_inputs = {"token_ids": token_ids, "segment_ids": segment_ids}
    logits = to_numpy(mlm_model(model_inputs))
    expected = gau_alpha_reference(arrays, CONFIG, token_ids, segment_ids, mlm=True)
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=0)
    # The encoder's output: the last block's norm, before the tied head.
    hidden = to_numpy(
        keras.Model(
            mlm_model.inputs, mlm_model.get_layer("Transformer-1-GatedAttentionUnit-Norm").output
        )(model_inputs)
    )
    expected = gau_alpha_reference(arrays, CONFIG, token_ids, segment_ids, mlm=False)
    np.testing.assert_allclose(hidden, expected, atol=1e-5, rtol=0)


def test_layers_and_weights(mlm_model):
    # GAU-alpha's layer names; nothing but kernels, scales and embeddings.
    for suffix in ("", "-Dropout", "-Add", "-Norm"):
        mlm_model.get_layer(f"Transformer-1-GatedAttentionUnit{suffix}")
    assert {w.path.rsplit("/", 1)[-1] for w in mlm_model.weights} == {
        "kernel", "embeddings", "query_scale", "key_scale"
    }
    attention = mlm_model.get_layer("Transformer-0-GatedAttentionUnit")
    assert (attention.units, attention.key_size, attention.normalization) == (
        24, 12, "softmax_plus"
    )
    assert not any("FeedForward" in layer.name for layer in mlm_model.layers)


def test_block_without_feed_forward_takes_no_feed_forward_layers():
    with pytest.raises(ValueError, match="feed_forward=None"):
        keras_attn.TransformerBlock(
            attention=None, feed_forward=None, attention_norm=None,
            feed_forward_norm=None, attention_dropout=None, feed_forward_dropout=None,
            attention_add=None, feed_forward_add=keras.layers.Add(),
        )


def test_lora_adapts_the_units_projections():
    model = keras_attn.build_transformer_model(
        dict(CONFIG, num_hidden_layers=1), variant="gau_alpha", application="encoder"
    )
    token_ids, segment_ids = inputs()
    model_inputs = {"token_ids": token_ids, "segment_ids": segment_ids}
    before = to_numpy(model(model_inputs))
    keras_attn.lora.enable_lora(model, rank=2)
    attention = model.get_layer("Transformer-0-GatedAttentionUnit")
    assert attention.input_dense.lora_enabled and attention.output_dense.lora_enabled
    # The adapters start at zero: the model computes what it computed.
    np.testing.assert_allclose(to_numpy(model(model_inputs)), before, atol=1e-6)
