"""Checkpoints made at test time: small random Hugging Face models saved
locally, and the same weights as Google-format TensorFlow checkpoints."""

import json
import os
import re

import numpy as np
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


@pytest.fixture(scope="session")
def hf_bert_dir(tmp_path_factory):
    """A random `BertForPreTraining` saved as a Hugging Face directory."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    model = transformers.BertForPreTraining(transformers.BertConfig(**SMALL))
    perturb(model, seed=0).eval()
    directory = tmp_path_factory.mktemp("hf_bert")
    model.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="session")
def hf_roberta_dir(tmp_path_factory):
    """A random `RobertaForMaskedLM` (pad id 1, positions offset by 2)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    config = transformers.RobertaConfig(
        **dict(SMALL, max_position_embeddings=42, type_vocab_size=1),
        pad_token_id=1,
        layer_norm_eps=1e-5,
    )
    model = transformers.RobertaForMaskedLM(config)
    perturb(model, seed=1).eval()
    directory = tmp_path_factory.mktemp("hf_roberta")
    model.save_pretrained(directory)
    return str(directory)


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


@pytest.fixture(scope="session")
def tf_checkpoint_writer():
    """`write_tf_checkpoint(prefix, arrays)`, for tests that write their own
    (broken, partial) TensorFlow checkpoints."""
    return write_tf_checkpoint


@pytest.fixture(scope="session")
def tf_bert_checkpoint(hf_bert_dir, tmp_path_factory):
    """The weights of `hf_bert_dir` as Google's `bert_config.json` +
    `bert_model.ckpt`, with a `global_step` as real checkpoints have."""
    from safetensors.numpy import load_file

    state = load_file(os.path.join(hf_bert_dir, "model.safetensors"))
    arrays = {}
    for name, value in state.items():
        if "position_ids" in name or "decoder" in name:
            continue
        if re.search(r"(query|key|value|dense|intermediate\.dense|output\.dense)\.weight$", name) and value.ndim == 2:
            value = value.T
        arrays[google_name(name)] = np.ascontiguousarray(value)
    arrays["global_step"] = np.array(1000, np.int64)
    directory = tmp_path_factory.mktemp("tf_bert")
    prefix = write_tf_checkpoint(str(directory / "bert_model.ckpt"), arrays)
    config = google_config(
        os.path.join(hf_bert_dir, "config.json"), str(directory / "bert_config.json")
    )
    return config, prefix, arrays


@pytest.fixture(autouse=True)
def restore_variant_registry():
    """Variants a test registers leave the registry when it ends."""
    from keras_attn.models import VARIANTS

    before = dict(VARIANTS)
    yield
    VARIANTS.clear()
    VARIANTS.update(before)
