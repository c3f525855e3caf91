"""`keras-attn-convert` writes atomically (a failure mid-write leaves the
previous output whole) and keeps the heads of the class a Hugging Face
folder was saved from (ELECTRA's discriminator)."""

import os

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.convert import main
from tests.checkpoint_files import perturb

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def file_bytes(directory):
    return {
        name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))
    }


def fail_mid_write(monkeypatch, method):
    """Makes `keras.Model.<method>` write a truncated file, then fail."""

    def truncated(self, path, *args, **kwargs):
        with open(path, "wb") as file:
            file.write(b"\x89HDF\r\n")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keras.Model, method, truncated)


def test_a_failed_write_leaves_the_previous_weights_directory(hf_bert_dir, tmp_path, monkeypatch, capsys):
    output = tmp_path / "converted"
    assert main([hf_bert_dir, str(output), "--no-verify", "--quiet"]) == 0
    before = file_bytes(output)
    assert sorted(before) == ["config.json", "model.weights.h5"]

    fail_mid_write(monkeypatch, "save_weights")
    assert main([hf_bert_dir, str(output), "--no-verify", "--quiet", "--application", "mlm"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert file_bytes(output) == before
    assert sorted(os.listdir(tmp_path)) == ["converted"]  # no staging left behind
    # A new OUTPUT is not created by a failed run.
    assert main([hf_bert_dir, str(tmp_path / "new"), "--no-verify", "--quiet"]) == 1
    assert sorted(os.listdir(tmp_path)) == ["converted"]


def test_a_failed_write_leaves_the_previous_keras_file(hf_bert_dir, tmp_path, monkeypatch, capsys):
    output = tmp_path / "converted.keras"
    assert main([hf_bert_dir, str(output), "--format", "keras", "--no-verify", "--quiet"]) == 0
    before = output.read_bytes()
    fail_mid_write(monkeypatch, "save")
    assert main([hf_bert_dir, str(output), "--format", "keras", "--no-verify", "--quiet"]) == 1
    assert output.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["converted.keras"]
    monkeypatch.undo()
    keras.saving.load_model(str(output))  # still a whole file


def test_a_replaced_output_has_the_new_files(hf_bert_dir, tmp_path, capsys):
    output = tmp_path / "converted"
    assert main([hf_bert_dir, str(output), "--no-verify", "--quiet"]) == 0
    (output / "notes.txt").write_text("kept")
    assert main([hf_bert_dir, str(output), "--application", "mlm", "--quiet"]) == 0
    assert (output / "notes.txt").read_text() == "kept"
    model = keras_attn.build_transformer_model(
        str(output / "config.json"), str(output / "model.weights.h5"), application="mlm"
    )
    assert model.application == "mlm"
    assert oct(os.stat(output / "model.weights.h5").st_mode & 0o777) == oct(
        os.stat(output / "notes.txt").st_mode & 0o777
    )


ELECTRA = dict(
    vocab_size=61, embedding_size=16, hidden_size=24, num_hidden_layers=1,
    num_attention_heads=2, intermediate_size=32, max_position_embeddings=24,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
)


@pytest.fixture(scope="module")
def electra_pretraining_dir(tmp_path_factory):
    model = transformers.ElectraForPreTraining(transformers.ElectraConfig(**ELECTRA))
    model = perturb(model, seed=5).eval()
    directory = tmp_path_factory.mktemp("electra_pretraining")
    model.save_pretrained(directory)
    return model, str(directory)


def discriminator_logits(model):
    ids = np.array([[2, 17, 40, 33, 5, 3]], "int32")
    ours = keras.ops.convert_to_numpy(model({"token_ids": ids, "segment_ids": np.zeros_like(ids)}))
    return ours, ids


def test_an_electra_discriminator_is_converted_with_its_head(electra_pretraining_dir, tmp_path, capsys):
    hf_model, source = electra_pretraining_dir
    for arguments in ([], ["--application", "discriminator"]):
        output = tmp_path / f"converted{len(arguments)}"
        assert main([source, str(output), "--quiet", *arguments]) == 0
        printed = capsys.readouterr().out
        assert "ElectraForPreTraining" in printed  # verified against its logits
        model = keras_attn.build_transformer_model(
            str(output / "config.json"), str(output / "model.weights.h5"),
            application="discriminator",
        )
        ours, ids = discriminator_logits(model)
        with torch.no_grad():
            expected = hf_model(torch.tensor(ids, dtype=torch.long)).logits.numpy()
        np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=0)


def test_a_conversion_that_leaves_a_head_out_says_so(electra_pretraining_dir, tmp_path, capsys):
    _, source = electra_pretraining_dir
    assert main([source, str(tmp_path / "out"), "--application", "encoder", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "Left out 4 checkpoint weights" in printed
    assert "discriminator_predictions.dense.weight" in printed
