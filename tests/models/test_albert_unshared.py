"""Unshared ALBERT: ALBERT's factorised embeddings under one block per
layer. Parity with `transformers`' ALBERT with one hidden group per layer
(which is exactly that architecture), and ALBERT checkpoints read into
every block, as bert4keras's `ALBERT_Unshared` reads them."""

import json
import os
import re

import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy
from tests.models.test_albert import ALBERT
from tests.models.test_albert import google_albert_name
from tests.models.test_albert import inputs

CONFIG = dict(ALBERT, num_hidden_layers=2)

# Hugging Face ALBERT block module -> BERT's per-layer module, for writing
# the grouped model's layers under BERT's names.
BERT_MODULES = {
    "attention.query": "attention.self.query",
    "attention.key": "attention.self.key",
    "attention.value": "attention.self.value",
    "attention.dense": "attention.output.dense",
    "attention.LayerNorm": "attention.output.LayerNorm",
    "ffn": "intermediate.dense",
    "ffn_output": "output.dense",
    "full_layer_layer_norm": "output.LayerNorm",
}


@pytest.fixture(scope="module")
def albert_models(tmp_path_factory):
    """A shared ALBERT (Hugging Face and Google format) and an ALBERT with
    one group per layer (its layers written under BERT's per-layer names),
    with their sequence outputs on `inputs()`."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from safetensors.numpy import save_file

    token_ids, segment_ids = inputs()
    arguments = dict(
        input_ids=torch.tensor(token_ids, dtype=torch.long),
        token_type_ids=torch.tensor(segment_ids, dtype=torch.long),
        attention_mask=torch.tensor(token_ids != 0, dtype=torch.long),
    )
    root = tmp_path_factory.mktemp("albert_unshared")

    shared = perturb(transformers.AlbertModel(transformers.AlbertConfig(**CONFIG)), seed=4).eval()
    shared.save_pretrained(root / "shared")
    arrays = {"global_step": np.array(3, np.int64)}
    for name, value in shared.state_dict().items():
        if "position_ids" in name:
            continue
        value = value.numpy()
        if name.endswith(".weight") and value.ndim == 2 and "embeddings" not in name:
            value = value.T
        arrays[google_albert_name(name)] = np.ascontiguousarray(value)
    (root / "google").mkdir()
    write_tf_checkpoint(str(root / "google" / "model.ckpt-3"), arrays)
    (root / "google" / "albert_config.json").write_text(json.dumps(dict(CONFIG, num_hidden_groups=1)))

    grouped = perturb(
        transformers.AlbertModel(transformers.AlbertConfig(**CONFIG, num_hidden_groups=2)), seed=5
    ).eval()
    state = {}
    for name, value in grouped.state_dict().items():
        if "position_ids" in name:
            continue
        block = re.match(r"encoder\.albert_layer_groups\.(\d+)\.albert_layers\.0\.(.+)\.(weight|bias)$", name)
        if block:
            group, module, kind = block.groups()
            name = f"encoder.layer.{group}.{BERT_MODULES[module]}.{kind}"
        state["albert." + name] = np.ascontiguousarray(value.numpy())
    (root / "unshared").mkdir()
    save_file(state, str(root / "unshared" / "model.safetensors"))
    (root / "unshared" / "config.json").write_text(json.dumps(dict(CONFIG, model_type="albert")))

    with torch.no_grad():
        expected = {
            "shared": shared(**arguments).last_hidden_state.numpy(),
            "unshared": grouped(**arguments).last_hidden_state.numpy(),
        }
    return root, expected


def run(model):
    token_ids, segment_ids = inputs()
    return to_numpy(model({"token_ids": token_ids, "segment_ids": segment_ids}))


def test_outputs_equal_transformers_albert_with_a_group_per_layer(albert_models):
    root, expected = albert_models
    directory = str(root / "unshared")
    model = keras_attn.build_transformer_model(directory, directory, variant="albert_unshared")
    real = inputs()[0] != 0
    np.testing.assert_allclose(run(model)[real], expected["unshared"][real], atol=1e-4)
    # The two layers hold different weights, so sharing one would not do.
    first = to_numpy(model.get_layer("Transformer-0-FeedForward").intermediate_dense.kernel)
    second = to_numpy(model.get_layer("Transformer-1-FeedForward").intermediate_dense.kernel)
    assert np.abs(first - second).max() > 1e-2


@pytest.mark.parametrize("source", ["huggingface", "google"])
def test_albert_checkpoints_fill_every_block(source, albert_models):
    root, expected = albert_models
    if source == "huggingface":
        config = checkpoint = str(root / "shared")
    else:
        config = str(root / "google" / "albert_config.json")
        checkpoint = str(root / "google" / "model.ckpt-3")
    model = keras_attn.build_transformer_model(config, checkpoint, model="albert_unshared")
    assert type(model.template).__name__ == "AlbertUnshared"
    real = inputs()[0] != 0
    np.testing.assert_allclose(run(model)[real], expected["shared"][real], atol=1e-4)
    # Copies, not one block: changing layer 1 leaves layer 0's weights.
    kernel = model.get_layer("Transformer-1-FeedForward").intermediate_dense.kernel
    kernel.assign(to_numpy(kernel) * 1.5)
    assert np.abs(run(model) - expected["shared"]).max() > 1e-3
    np.testing.assert_array_equal(
        to_numpy(model.get_layer("Transformer-0-FeedForward").intermediate_dense.kernel) * 1.5,
        to_numpy(kernel),
    )
