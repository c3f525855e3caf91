"""`keras-attn-convert` writes atomically (a failure mid-write or at any
rename leaves the previous output whole, never new weights beside an old
config.json), refuses an OUTPUT it cannot write or that holds another
checkpoint, and keeps the heads of the class a Hugging Face folder was saved
from (ELECTRA's discriminator)."""

import hashlib
import json
import os
import pathlib
import shutil

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.convert import main
from tests.checkpoint_files import perturb
from tests.test_files import fail_rename

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


@pytest.fixture(scope="module")
def hf_bert_dir_changed(hf_bert_dir, tmp_path_factory):
    """`hf_bert_dir` with the same shapes, another config value and other
    weights: its conversion must never be mixed with `hf_bert_dir`'s."""
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    directory = tmp_path_factory.mktemp("hf_bert_changed")
    config = json.loads((pathlib.Path(hf_bert_dir) / "config.json").read_text())
    config["layer_norm_eps"] = 1e-6
    (directory / "config.json").write_text(json.dumps(config))
    arrays = load_file(os.path.join(hf_bert_dir, "model.safetensors"))
    save_file({name: array + 0.5 for name, array in arrays.items()}, str(directory / "model.safetensors"))
    return str(directory)


def converted_state(directory):
    """What a loader of `directory` reads: its config.json, and a digest of
    every array of its model.weights.h5."""
    import h5py

    digest = hashlib.sha256()
    with h5py.File(directory / "model.weights.h5", "r") as file:
        file.visititems(
            lambda name, item: digest.update(name.encode() + item[()].tobytes())
            if isinstance(item, h5py.Dataset) else None
        )
    return (directory / "config.json").read_text(), digest.hexdigest()


def test_output_switches_whole_whichever_rename_fails(
    hf_bert_dir, hf_bert_dir_changed, tmp_path, monkeypatch, capsys
):
    """Re-converting into OUTPUT with a failure injected at each rename
    (the first, the second, ...) leaves OUTPUT wholly old, with no
    temporary folder beside it; the run that meets no failure leaves it
    wholly new. Two renames of files in place left new weights beside the
    old config.json: a silently mixed model of two same-shape checkpoints."""
    reference = tmp_path / "reference"
    assert main([hf_bert_dir_changed, str(reference), "--no-verify", "--quiet"]) == 0
    new = converted_state(reference)
    shutil.rmtree(reference)
    output = tmp_path / "converted"
    assert main([hf_bert_dir, str(output), "--no-verify", "--quiet"]) == 0
    old = converted_state(output)
    assert old[0] != new[0] and old[1] != new[1]

    call = 1
    while True:
        failed = fail_rename(monkeypatch, call, tmp_path)
        status = main([hf_bert_dir_changed, str(output), "--no-verify", "--quiet"])
        monkeypatch.undo()
        if not failed:
            break
        assert status == 1, call
        assert converted_state(output) == old, call
        assert sorted(os.listdir(tmp_path)) == ["converted"], call
        message = capsys.readouterr().err
        assert f"Cannot write OUTPUT {str(output)!r}" in message, message
        call += 1
    assert status == 0 and call > 2  # two renames, each failed once
    assert converted_state(output) == new
    assert sorted(os.listdir(output)) == ["config.json", "model.weights.h5"]
    assert sorted(os.listdir(tmp_path)) == ["converted"]


def test_a_folder_holding_another_checkpoint_is_refused_unless_overwrite(hf_bert_dir, tmp_path, capsys):
    """Converting into a transformers model's folder replaced its config.json
    (exit 0), leaving its weights beside a config they do not fit."""
    output = tmp_path / "hf_model"
    shutil.copytree(hf_bert_dir, output)
    (output / "tokenizer.json").write_text("{}")
    before = file_bytes(output)
    assert main([hf_bert_dir, str(output), "--no-verify"]) == 1
    message = capsys.readouterr().err
    assert message.startswith(
        f"keras-attn-convert: error: OUTPUT {str(output)!r} holds another checkpoint's "
        "files: config.json, model.safetensors."
    ), message
    assert "--overwrite" in message
    assert "Building the model" not in message  # refused before any work
    assert file_bytes(output) == before

    assert main([hf_bert_dir, str(output), "--no-verify", "--quiet", "--overwrite"]) == 0
    assert sorted(os.listdir(output)) == ["config.json", "model.weights.h5", "tokenizer.json"]
    assert (output / "tokenizer.json").read_text() == "{}"
    # Now a folder this command wrote: converting into it again needs no --overwrite.
    assert main([hf_bert_dir, str(output), "--no-verify", "--quiet"]) == 0


def test_an_output_that_cannot_be_written_is_named_with_the_reason(
    hf_bert_dir, tmp_path, monkeypatch, capsys
):
    """The error named a temporary path the user never gave
    (`.../.keras-attn-convert-xxxx`), after the whole conversion; now it
    names OUTPUT and why, before anything is read where it can tell."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    locked = tmp_path / "locked"
    locked.mkdir()
    a_directory = tmp_path / "model.keras"
    a_directory.mkdir()
    real_access = os.access
    # As a user without write permission on `locked` sees it (root may
    # write anywhere, so the permission is faked).
    monkeypatch.setattr(
        os, "access",
        lambda path, mode, **kwargs: os.fspath(path) != str(locked) and real_access(path, mode, **kwargs),
    )
    cases = [
        (a_file / "out", [], f"{str(a_file)!r} is a file, not a directory"),
        (a_file, [], "it is a file; --format weights writes a directory (config.json and model.weights.h5)"),
        (a_directory, ["--format", "keras"], "it is a directory; --format keras writes one .keras file"),
        (locked / "out", [], f"its directory {str(locked)!r} is not writable (permission denied)"),
        (locked / "sub" / "out", [], (
            f"its directory {str(locked / 'sub')!r} does not exist, and {str(locked)!r}, "
            "where it would be created, is not writable (permission denied)"
        )),
    ]
    for output, options, reason in cases:
        assert main([hf_bert_dir, str(output), *options]) == 1, output
        message = capsys.readouterr().err
        assert message == f"keras-attn-convert: error: Cannot write OUTPUT {str(output)!r}: {reason}.\n"
    monkeypatch.undo()

    # A failure only writing meets still names OUTPUT, not a temporary name.
    real_mkdir = os.mkdir

    def refused(path, *args, **kwargs):
        if os.fspath(path).startswith(str(tmp_path)):
            raise PermissionError(13, "Permission denied", path)
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", refused)
    output = tmp_path / "out"
    assert main([hf_bert_dir, str(output), "--no-verify", "--quiet"]) == 1
    message = capsys.readouterr().err
    assert message == f"keras-attn-convert: error: Cannot write OUTPUT {str(output)!r}: Permission denied.\n"


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
