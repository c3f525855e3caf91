"""NEZHA (`variant="nezha"`, bert4keras's `model="nezha"`): a whole tiny
model against a numpy forward pass written from the paper's equations and the
released code's table, loaded from a Google-format checkpoint written here."""

import json
import math
import os
import warnings

import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints.readers import UnusedWeightsWarning
from keras_attn.models.nezha import Nezha
from tests import reference
from tests.checkpoint_files import google_bert_arrays
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy

# NEZHA's released bert_config.json fields, tiny; clipped at 3 so that the
# sequences (length 9) reach past the table.
CONFIG = dict(
    vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=16, type_vocab_size=2,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, hidden_act="gelu",
    initializer_range=0.02, max_relative_position=3, use_relative_position=True,
)
EPSILON = 1e-12  # Google's LayerNorm epsilon, the config's default


def nezha_arrays(seed=7):
    """A NEZHA checkpoint's arrays: BERT's Google names, no position table."""
    arrays = google_bert_arrays(CONFIG, seed=seed)
    del arrays["bert/embeddings/position_embeddings"]
    return arrays


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("nezha")
    arrays = nezha_arrays()
    write_tf_checkpoint(str(directory / "bert_model.ckpt"), arrays)
    (directory / "bert_config.json").write_text(json.dumps(CONFIG))
    return str(directory / "bert_config.json"), str(directory / "bert_model.ckpt"), arrays


@pytest.fixture(scope="module")
def models(checkpoint):
    config_path, checkpoint_path, _ = checkpoint
    return {
        application: keras_attn.build_transformer_model(
            config_path, checkpoint_path, application=application
        )
        for application in ("mlm", "lm")
    }


def inputs():
    rng = np.random.default_rng(3)
    token_ids = rng.integers(4, CONFIG["vocab_size"], size=(2, 9)).astype("int32")
    token_ids[1, 6:] = 0  # padding
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 5:] = 1
    segment_ids[token_ids == 0] = 0
    return token_ids, segment_ids


def numpy_nezha(arrays, token_ids, segment_ids, causal):
    """NEZHA's masked-LM logits in float64 numpy: BERT's post-LN blocks, no
    position table, attention `reference.nezha_attention`."""
    weight = {name: np.asarray(value, np.float64) for name, value in arrays.items()}
    heads = CONFIG["num_attention_heads"]
    size = CONFIG["hidden_size"] // heads
    batch, length = token_ids.shape

    def norm(x, name):
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + EPSILON) * weight[name + "/gamma"] + weight[name + "/beta"]

    def dense(x, name):
        return x @ weight[name + "/kernel"] + weight[name + "/bias"]

    def gelu(x):
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))

    embedding = weight["bert/embeddings/word_embeddings"]
    hidden = embedding[token_ids] + weight["bert/embeddings/token_type_embeddings"][segment_ids]
    hidden = norm(hidden, "bert/embeddings/LayerNorm")
    keep = np.broadcast_to((token_ids != 0)[:, None, :], (batch, length, length))
    if causal:
        keep = keep & np.tril(np.ones((length, length), bool))
    for layer in range(CONFIG["num_hidden_layers"]):
        prefix = f"bert/encoder/layer_{layer}/"

        def heads_of(name):
            return dense(hidden, prefix + name).reshape(batch, length, heads, size)

        attended = reference.nezha_attention(
            heads_of("attention/self/query"), heads_of("attention/self/key"),
            heads_of("attention/self/value"), keep, CONFIG["max_relative_position"],
        ).reshape(batch, length, -1)
        hidden = norm(
            hidden + dense(attended, prefix + "attention/output/dense"),
            prefix + "attention/output/LayerNorm",
        )
        inner = gelu(dense(hidden, prefix + "intermediate/dense"))
        hidden = norm(hidden + dense(inner, prefix + "output/dense"), prefix + "output/LayerNorm")
    transformed = norm(
        gelu(dense(hidden, "cls/predictions/transform/dense")),
        "cls/predictions/transform/LayerNorm",
    )
    return transformed @ embedding.T + weight["cls/predictions/output_bias"]


def test_a_nezha_config_selects_the_variant(models):
    model = models["mlm"]
    assert isinstance(model.template, Nezha)
    layer = model.get_layer("Transformer-1-MultiHeadSelfAttention")
    assert layer.position_encoding == "functional_relative"
    assert layer.max_relative_position == CONFIG["max_relative_position"]
    assert "Embedding-Position" not in {layer.name for layer in model.layers}


@pytest.mark.parametrize("application", ["mlm", "lm"])
def test_the_model_equals_numpy_nezha(models, checkpoint, application):
    token_ids, segment_ids = inputs()
    output = to_numpy(models[application]({"token_ids": token_ids, "segment_ids": segment_ids}))
    expected = numpy_nezha(checkpoint[2], token_ids, segment_ids, causal=application == "lm")
    real = token_ids != 0
    np.testing.assert_allclose(output[real], expected[real], atol=1e-5, rtol=1e-5)


def test_bert4keras_model_name_builds_nezha(checkpoint, models):
    config_path, checkpoint_path, _ = checkpoint
    plain = dict(CONFIG)
    del plain["use_relative_position"]  # the variant comes from model= alone
    model = keras_attn.build_transformer_model(
        plain, checkpoint_path, model="nezha", application="mlm"
    )
    assert isinstance(model.template, Nezha)
    token_ids, segment_ids = inputs()
    batch = {"token_ids": token_ids, "segment_ids": segment_ids}
    np.testing.assert_allclose(
        to_numpy(model(batch)), to_numpy(models["mlm"](batch)), atol=1e-6
    )


def test_model_type_nezha_selects_the_variant():
    config = dict(CONFIG, model_type="nezha")
    del config["use_relative_position"]
    model = keras_attn.build_transformer_model(config)
    assert isinstance(model.template, Nezha)


def test_bert_is_refused_for_a_nezha_config(checkpoint):
    with pytest.raises(ValueError, match="variant='bert'.*nezha model.*variant='nezha'"):
        keras_attn.build_transformer_model(checkpoint[0], variant="bert")


def test_a_bert_checkpoint_leaves_its_position_table_unused(tmp_path):
    arrays = google_bert_arrays(CONFIG, seed=1)
    write_tf_checkpoint(str(tmp_path / "bert_model.ckpt"), arrays)
    with pytest.warns(UnusedWeightsWarning, match="position_embeddings"):
        keras_attn.build_transformer_model(
            dict(CONFIG), str(tmp_path / "bert_model.ckpt"), variant="nezha"
        )


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_a_bad_max_relative_position_is_named(value):
    with pytest.raises(ValueError, match=rf"max_relative_position.*received {value!r}"):
        keras_attn.build_transformer_model(dict(CONFIG, max_relative_position=value))
