"""ELECTRA: parity with `transformers` (`ElectraModel`,
`ElectraForPreTraining`, `ElectraForMaskedLM`) on random weights saved as
Hugging Face directories and as one Google-format TensorFlow checkpoint
holding both models, with embeddings narrower than the blocks.

The Google names are spelt out here from ELECTRA's release layout,
independently of the library's tables."""

import json
import os
import re

import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy

DISCRIMINATOR = dict(
    vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=2,
    num_attention_heads=4, intermediate_size=37, max_position_embeddings=40,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, hidden_act="gelu",
    type_vocab_size=2, initializer_range=0.02,
)
# The generator: the same embeddings, narrower blocks.
GENERATOR = dict(DISCRIMINATOR, hidden_size=24, num_attention_heads=2, intermediate_size=29)


def inputs():
    rng = np.random.default_rng(0)
    token_ids = rng.integers(5, DISCRIMINATOR["vocab_size"], size=(2, 9)).astype("int32")
    token_ids[1, 6:] = 0  # padding
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 4:] = 1
    segment_ids[token_ids == 0] = 0
    return token_ids, segment_ids


def google_electra_name(hf_name, scope):
    """`ElectraFor*` name -> ELECTRA's TF name; `scope` is `electra`
    (discriminator) or `generator`, whose embeddings are `electra/`'s."""
    name = hf_name
    name = name.replace("discriminator_predictions.dense_prediction.", "discriminator_predictions.dense_1.")
    name = name.replace("generator_lm_head.bias", "generator_predictions.output_bias")
    if name.startswith("electra.embeddings."):
        name = name  # shared by both models, always under electra/
    elif name.startswith("electra."):
        name = scope + name.removeprefix("electra")
    name = re.sub(r"layer\.(\d+)\.", r"layer_\1.", name).replace(".", "/")
    name = re.sub(r"LayerNorm/weight$", "LayerNorm/gamma", name)
    name = re.sub(r"LayerNorm/bias$", "LayerNorm/beta", name)
    name = re.sub(r"_embeddings/weight$", "_embeddings", name)
    return re.sub(r"/weight$", "/kernel", name)


@pytest.fixture(scope="module")
def electra(tmp_path_factory):
    """Random `ElectraForPreTraining` and `ElectraForMaskedLM` sharing their
    embeddings, saved as Hugging Face directories and as one Google
    checkpoint, and their outputs on `inputs()`."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    discriminator = perturb(
        transformers.ElectraForPreTraining(transformers.ElectraConfig(**DISCRIMINATOR)), seed=1
    ).eval()
    generator = perturb(
        transformers.ElectraForMaskedLM(transformers.ElectraConfig(**GENERATOR)), seed=2
    ).eval()
    with torch.no_grad():
        for name, parameter in generator.electra.embeddings.named_parameters():
            parameter.copy_(dict(discriminator.electra.embeddings.named_parameters())[name])
    root = tmp_path_factory.mktemp("electra")
    discriminator.save_pretrained(root / "discriminator")
    generator.save_pretrained(root / "generator")

    token_ids, segment_ids = inputs()
    arguments = dict(
        input_ids=torch.tensor(token_ids, dtype=torch.long),
        token_type_ids=torch.tensor(segment_ids, dtype=torch.long),
        attention_mask=torch.tensor(token_ids != 0, dtype=torch.long),
    )
    with torch.no_grad():
        expected = {
            "encoder": discriminator.electra(**arguments).last_hidden_state.numpy(),
            "discriminator": discriminator(**arguments).logits.numpy(),
            "mlm": generator(**arguments).logits.numpy(),
        }

    # One TF checkpoint with both models, as ELECTRA's pretraining saves it.
    arrays = {"global_step": np.array(7, np.int64)}
    for model, scope in ((discriminator, "electra"), (generator, "generator")):
        for name, value in model.state_dict().items():
            if "position_ids" in name or name == "generator_lm_head.weight":
                continue
            value = value.numpy()
            if name.endswith(".weight") and value.ndim == 2 and "_embeddings" not in name:
                value = value.T  # torch.nn.Linear is (out, in)
            arrays[google_electra_name(name, scope)] = np.ascontiguousarray(value)
    google = root / "google"
    google.mkdir()
    write_tf_checkpoint(str(google / "model.ckpt-7"), arrays)
    for model, sizes in (("discriminator", DISCRIMINATOR), ("generator", GENERATOR)):
        # A bert_config.json-style config: no `model_type`.
        (google / f"{model}_config.json").write_text(json.dumps(sizes))
    return root, expected


def test_google_names_written_here_are_electras(electra):
    # The writer above produces the names of ELECTRA's release.
    root, _ = electra
    from keras_attn.checkpoints.readers import open_checkpoint

    names = set(open_checkpoint(str(root / "google" / "model.ckpt-7")).names())
    for name in (
        "electra/embeddings/word_embeddings", "electra/embeddings/LayerNorm/gamma",
        "electra/embeddings_project/kernel", "generator/embeddings_project/kernel",
        "electra/encoder/layer_1/attention/self/query/kernel",
        "generator/encoder/layer_1/output/LayerNorm/beta",
        "discriminator_predictions/dense_1/kernel", "generator_predictions/output_bias",
        "generator_predictions/LayerNorm/gamma",
    ):
        assert name in names, name
    assert not any(name.startswith("generator/embeddings/") for name in names)


@pytest.mark.parametrize("source", ["huggingface", "google"])
@pytest.mark.parametrize("application", ["encoder", "discriminator", "mlm"])
def test_outputs_equal_transformers_electra(source, application, electra):
    root, expected = electra
    model = "generator" if application == "mlm" else "discriminator"
    if source == "huggingface":
        config = checkpoint = str(root / model)
        variant = None  # model_type: electra selects it
    else:
        config = str(root / "google" / f"{model}_config.json")
        checkpoint = str(root / "google" / "model.ckpt-7")
        variant = "electra"
    built = keras_attn.build_transformer_model(
        config, checkpoint, variant=variant, application=application
    )
    assert type(built.template).__name__ == "Electra"
    token_ids, segment_ids = inputs()
    real = token_ids != 0
    outputs = to_numpy(built({"token_ids": token_ids, "segment_ids": segment_ids}))
    assert outputs.shape == expected[application].shape
    np.testing.assert_allclose(outputs[real], expected[application][real], atol=1e-4)


def test_bert4keras_model_name_electra_reads_the_discriminator(electra):
    root, expected = electra
    google = root / "google"
    model = keras_attn.build_transformer_model(
        config_path=str(google / "discriminator_config.json"),
        checkpoint_path=str(google / "model.ckpt-7"),
        model="electra",
    )
    token_ids, segment_ids = inputs()
    real = token_ids != 0
    outputs = to_numpy(model([token_ids, segment_ids]))
    np.testing.assert_allclose(outputs[real], expected["encoder"][real], atol=1e-4)


def test_the_projection_is_in_the_computation(electra):
    # Without `embeddings_project` the embeddings would not even fit the
    # blocks; with a changed projection the output changes.
    root, expected = electra
    model = keras_attn.build_transformer_model(str(root / "discriminator"), str(root / "discriminator"))
    kernel = model.get_layer("Embedding-Mapping").kernel
    assert tuple(kernel.shape) == (16, 32)
    kernel.assign(to_numpy(kernel) * 1.5)
    token_ids, segment_ids = inputs()
    outputs = to_numpy(model({"token_ids": token_ids, "segment_ids": segment_ids}))
    assert np.abs(outputs - expected["encoder"]).max() > 1e-3
