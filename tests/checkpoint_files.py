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
