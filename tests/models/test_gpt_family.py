"""bert4keras's GPT (CDial-GPT) and GPT2-ML against numpy forward passes
written here from bert4keras's `GPT` and `GPT2_ML` classes, and their
TensorFlow checkpoint names."""

import json
import math

import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy
from tests.reference import softmax

CONFIG = dict(
    vocab_size=37, hidden_size=12, num_hidden_layers=2, num_attention_heads=3,
    intermediate_size=20, max_position_embeddings=16, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, hidden_act="gelu", type_vocab_size=2,
    initializer_range=0.3,
)
IDS = np.array([[5, 9, 2, 30, 7, 11], [6, 8, 21, 0, 0, 0]])


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def weights(model, name):
    return [to_numpy(w) for w in model.get_layer(name).weights]


def attention(model, name, x, real, heads):
    """Causal multi-head attention, padding masked as keys."""
    (wq, bq, wk, bk, wv, bv, wo, bo) = weights(model, name)
    batch, length, _ = x.shape

    def split(y):
        return y.reshape(batch, length, heads, -1).transpose(0, 2, 1, 3)

    q, k, v = split(x @ wq + bq), split(x @ wk + bk), split(x @ wv + bv)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    allowed = np.tril(np.ones((length, length), bool))[None, None] & real[:, None, None, :]
    scores = np.where(allowed, scores, -1e9)
    out = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
    return out @ wo + bo


def feed_forward(model, name, x):
    w1, b1, w2, b2 = weights(model, name)
    return gelu(x @ w1 + b1) @ w2 + b2


def reference(model, variant, ids, segments, epsilon):
    """bert4keras's forward pass: GPT's post-LN BERT blocks without the
    embedding norm; GPT2-ML's `x + Att(x)` then `LN1(x + FFN(LN0(x)))`
    with the embedding norm; both end in the tied embedding."""
    (table,) = weights(model, "Embedding-Token")
    (positions,) = weights(model, "Embedding-Position")
    real = ids != 0
    x = table[ids] + positions[None, : ids.shape[1]]
    if variant == "gpt":
        (segment_table,) = weights(model, "Embedding-Segment")
        x = x + segment_table[segments]
    else:
        x = layer_norm(x, *weights(model, "Embedding-Norm"), epsilon)
    heads = CONFIG["num_attention_heads"]
    for i in range(CONFIG["num_hidden_layers"]):
        name = f"Transformer-{i}"
        if variant == "gpt":
            x = layer_norm(
                x + attention(model, f"{name}-MultiHeadSelfAttention", x, real, heads),
                *weights(model, f"{name}-MultiHeadSelfAttention-Norm"), epsilon,
            )
            x = layer_norm(
                x + feed_forward(model, f"{name}-FeedForward", x),
                *weights(model, f"{name}-FeedForward-Norm"), epsilon,
            )
        else:
            x = x + attention(model, f"{name}-MultiHeadSelfAttention", x, real, heads)
            normed = layer_norm(x, *weights(model, f"{name}-FeedForward-Norm-0"), epsilon)
            x = layer_norm(
                x + feed_forward(model, f"{name}-FeedForward", normed),
                *weights(model, f"{name}-FeedForward-Norm-1"), epsilon,
            )
    return x @ table.T


def perturb_norms(model):
    """Norms start at (1, 0); random values make their placement matter."""
    rng = np.random.default_rng(4)
    for layer in model.layers:
        if "Norm" in layer.name:
            for weight in layer.weights:
                weight.assign(rng.normal(1.0 if weight.name == "gamma" else 0.0, 0.3, weight.shape))


@pytest.mark.parametrize("variant, epsilon", [("gpt", 1e-12), ("gpt2_ml", 1e-5)])
def test_forward_pass_equals_bert4keras_structure(variant, epsilon):
    model = keras_attn.build_transformer_model(CONFIG, variant=variant)
    perturb_norms(model)
    assert model.application == "lm"
    segments = np.zeros_like(IDS)
    segments[0, 3:] = 1
    inputs = {"token_ids": IDS}
    if "segment_ids" in model.input_contract.names:
        inputs["segment_ids"] = segments
    expected = reference(model, variant, IDS, segments, epsilon)
    real = IDS != 0
    np.testing.assert_allclose(to_numpy(model(inputs))[real], expected[real], atol=1e-4)
    names = {layer.name for layer in model.layers}
    assert ("Embedding-Norm" in names) == (variant == "gpt2_ml")
    assert not any(name.startswith("MLM-") for name in names)


def test_tensorflow_names_load(tmp_path):
    """Each family's checkpoint names (bert4keras's `variable_mapping`),
    written here from a built model's weights, load back to equal outputs."""
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(CONFIG))
    for variant in ("gpt", "gpt2_ml"):
        source = keras_attn.build_transformer_model(CONFIG, variant=variant)
        perturb_norms(source)
        arrays = {}
        for variable in source.weights:
            arrays[checkpoint_name(variant, variable.path)] = to_numpy(variable)
        prefix = write_tf_checkpoint(str(tmp_path / f"{variant}.ckpt"), arrays)
        loaded = keras_attn.build_transformer_model(str(config_path), prefix, model=variant)
        inputs = {"token_ids": IDS}
        if "segment_ids" in loaded.input_contract.names:
            inputs["segment_ids"] = np.zeros_like(IDS)
        np.testing.assert_array_equal(to_numpy(loaded(inputs)), to_numpy(source(inputs)))


def checkpoint_name(variant, path):
    layer, weight = path.split("/", 1)
    if variant == "gpt":
        bert = {
            "Embedding-Token": "gpt/embeddings/word_embeddings",
            "Embedding-Segment": "gpt/embeddings/token_type_embeddings",
            "Embedding-Position": "gpt/embeddings/position_embeddings",
        }
        if layer in bert:
            return bert[layer]
        index, part = layer.split("-")[1], "-".join(layer.split("-")[2:])
        prefix = f"gpt/transformer/layer_{index}/"
        sub = {
            "MultiHeadSelfAttention": {
                "query_dense/kernel": "attention/self/query/kernel", "query_dense/bias": "attention/self/query/bias",
                "key_dense/kernel": "attention/self/key/kernel", "key_dense/bias": "attention/self/key/bias",
                "value_dense/kernel": "attention/self/value/kernel", "value_dense/bias": "attention/self/value/bias",
                "output_dense/kernel": "attention/output/dense/kernel", "output_dense/bias": "attention/output/dense/bias",
            },
            "MultiHeadSelfAttention-Norm": {"gamma": "attention/output/LayerNorm/gamma", "beta": "attention/output/LayerNorm/beta"},
            "FeedForward": {
                "intermediate_dense/kernel": "intermediate/dense/kernel", "intermediate_dense/bias": "intermediate/dense/bias",
                "output_dense/kernel": "output/dense/kernel", "output_dense/bias": "output/dense/bias",
            },
            "FeedForward-Norm": {"gamma": "output/LayerNorm/gamma", "beta": "output/LayerNorm/beta"},
        }
        return prefix + sub[part][weight]
    embeddings = {
        "Embedding-Token": "newslm/embeddings/word_embed",
        "Embedding-Position": "newslm/embeddings/pos_embed",
    }
    if layer in embeddings:
        return embeddings[layer]
    if layer == "Embedding-Norm":
        return f"newslm/embeddings/LayerNorm_embed_norm/{weight}"
    index, part = int(layer.split("-")[1]), "-".join(layer.split("-")[2:])
    prefix = f"newslm/layer{index:02d}/"
    projection = {"query": "query_layer", "key": "key_layer", "value": "value_layer", "output": "context_projection_layer"}
    if part == "MultiHeadSelfAttention":
        dense, kind = weight.split("/")
        return prefix + f"{projection[dense.removesuffix('_dense')]}/{kind}"
    if part == "FeedForward":
        dense, kind = weight.split("/")
        return prefix + f"{'intermediate' if dense == 'intermediate_dense' else 'output'}/{kind}"
    return prefix + f"LayerNorm_mlp_ln{part[-1]}/{weight}"


def test_a_pooler_is_refused():
    with pytest.raises(ValueError, match="no pooler"):
        keras_attn.build_transformer_model(CONFIG, variant="gpt2", with_pool=True)
