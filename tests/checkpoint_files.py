"""Checkpoints made at test time, written independently of the library's
name tables: small random Hugging Face models and the same weights as
Google-format TensorFlow checkpoints. The fixtures in tests/conftest.py use
these; tests may call them directly."""

import json
import re

import pytest

SMALL = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=40,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def perturb(model, seed):
    """HF initialises LayerNorms to (1, 0) and biases to 0; random values
    everywhere make every name-table entry matter."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator))
    return model


def google_name(hf_name):
    """Hugging Face BERT name -> Google TF checkpoint name (written here
    independently of the library's table)."""
    name = hf_name.removeprefix("bert.")
    name = re.sub(r"layer\.(\d+)\.", r"layer_\1.", name)
    name = name.replace(".", "/")
    name = re.sub(r"LayerNorm/weight$", "LayerNorm/gamma", name)
    name = re.sub(r"LayerNorm/bias$", "LayerNorm/beta", name)
    name = re.sub(r"(embeddings)/weight$", r"\1", name)
    name = name.replace("cls/seq_relationship/weight", "cls/seq_relationship/output_weights")
    name = name.replace("cls/seq_relationship/bias", "cls/seq_relationship/output_bias")
    name = name.replace("cls/predictions/bias", "cls/predictions/output_bias")
    name = re.sub(r"/weight$", "/kernel", name)
    if not name.startswith("cls/"):
        name = "bert/" + name
    return name


def write_tf_checkpoint(prefix, arrays):
    """Writes a name-based TensorFlow checkpoint with `tf.raw_ops.SaveV2`."""
    tf = pytest.importorskip("tensorflow")
    names = sorted(arrays)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(arrays[name]) for name in names],
    )
    return prefix


def google_config(hf_config_path, path, **extra):
    with open(hf_config_path) as file:
        hf = json.load(file)
    keys = [
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_act", "hidden_dropout_prob",
        "attention_probs_dropout_prob", "max_position_embeddings",
        "type_vocab_size", "initializer_range",
    ]
    config = {key: hf[key] for key in keys}
    config.update(extra)
    with open(path, "w") as file:
        json.dump(config, file)
    return path


def google_bert_arrays(config, seed=0):
    """Random arrays under the names of a Google-format checkpoint for
    `config` (a `bert_config.json` or `albert_config.json` dict): BERT, with
    RoBERTa+'s `embedding_size` and `attention_key_size` when given, and
    ALBERT's one shared block when the config has `num_hidden_groups`.
    Written from Google's releases, independently of the library's tables."""
    import numpy as np

    rng = np.random.default_rng(seed)
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_size = hidden // heads
    key_size = config.get("attention_key_size", head_size)
    width = config.get("embedding_size", hidden)
    intermediate = config["intermediate_size"]

    def random(*shape):
        return rng.normal(scale=0.1, size=shape).astype("float32")

    def dense(name, inputs, outputs):
        return {f"{name}/kernel": random(inputs, outputs), f"{name}/bias": random(outputs)}

    def norm(name, size):
        return {f"{name}/gamma": 1 + random(size), f"{name}/beta": random(size)}

    arrays = {
        "bert/embeddings/word_embeddings": random(config["vocab_size"], width),
        "bert/embeddings/token_type_embeddings": random(config.get("type_vocab_size", 2), width),
        "bert/embeddings/position_embeddings": random(config["max_position_embeddings"], width),
        **norm("bert/embeddings/LayerNorm", width),
        **dense("bert/pooler/dense", hidden, hidden),
        **dense("cls/predictions/transform/dense", hidden, width),
        **norm("cls/predictions/transform/LayerNorm", width),
        "cls/predictions/output_bias": random(config["vocab_size"]),
        "cls/seq_relationship/output_weights": random(2, hidden),
        "cls/seq_relationship/output_bias": random(2),
        "global_step": np.array(1000, np.int64),
    }
    if width != hidden:
        arrays.update(dense("bert/encoder/embedding_hidden_mapping_in", width, hidden))
    if "num_hidden_groups" in config:
        block = "bert/encoder/transformer/group_0/inner_group_0/"
        names = dict(
            query="attention_1/self/query", key="attention_1/self/key",
            value="attention_1/self/value", output="attention_1/output/dense",
            attention_norm="LayerNorm", intermediate="ffn_1/intermediate/dense",
            ffn_output="ffn_1/intermediate/output/dense", ffn_norm="LayerNorm_1",
        )
        blocks = [{key: block + name for key, name in names.items()}]
    else:
        blocks = []
        for layer in range(config["num_hidden_layers"]):
            prefix = f"bert/encoder/layer_{layer}/"
            blocks.append({
                key: prefix + name
                for key, name in dict(
                    query="attention/self/query", key="attention/self/key",
                    value="attention/self/value", output="attention/output/dense",
                    attention_norm="attention/output/LayerNorm",
                    intermediate="intermediate/dense", ffn_output="output/dense",
                    ffn_norm="output/LayerNorm",
                ).items()
            })
    for names in blocks:
        arrays.update(dense(names["query"], hidden, heads * key_size))
        arrays.update(dense(names["key"], hidden, heads * key_size))
        arrays.update(dense(names["value"], hidden, heads * head_size))
        arrays.update(dense(names["output"], heads * head_size, hidden))
        arrays.update(norm(names["attention_norm"], hidden))
        arrays.update(dense(names["intermediate"], hidden, intermediate))
        arrays.update(dense(names["ffn_output"], intermediate, hidden))
        arrays.update(norm(names["ffn_norm"], hidden))
    return arrays


def assert_converted_like_transformers(reference, directory, output, capsys, ids):
    """`keras-attn-convert` on the Hugging Face causal LM folder `directory`
    into `output`: it verifies against `AutoModelForCausalLM`'s logits and
    exits 0, and the config and weights it writes rebuild a model whose
    logits on `ids` equal `reference`'s (1e-4)."""
    import numpy as np
    import torch

    import keras_attn
    from keras_attn.convert import main
    from tests.harness import to_numpy

    assert main([str(directory), str(output), "--quiet"]) == 0
    assert "transformers.AutoModelForCausalLM's logits" in capsys.readouterr().out
    converted = keras_attn.build_transformer_model(
        f"{output}/config.json", f"{output}/model.weights.h5"
    )
    with torch.no_grad():
        expected = reference(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(to_numpy(converted({"token_ids": ids})), expected, atol=1e-4)
