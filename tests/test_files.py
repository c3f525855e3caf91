"""`keras_attn.files`: what the library writes appears whole or not at all,
and nothing temporary is left behind (LoRA adapters' files included)."""

import os
import pathlib

import numpy as np
import pytest

import keras_attn
from keras_attn.files import atomic_directory
from keras_attn.files import atomic_write
from keras_attn.lora import enable_lora
from keras_attn.lora import load_lora_weights
from keras_attn.lora import save_lora_weights


def test_a_completed_write_replaces_the_file_and_keeps_its_permissions(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("old")
    os.chmod(path, 0o640)
    with atomic_write(path) as temporary:
        assert os.path.dirname(temporary) == str(tmp_path)
        assert temporary.endswith("-notes.txt")  # writers that read the ending accept it
        with open(temporary, "w") as file:
            file.write("new")
    assert path.read_text() == "new"
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_new_file_gets_the_permissions_of_a_plain_open(tmp_path):
    umask = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "new.txt") as temporary:
            with open(temporary, "w") as file:
                file.write("new")
        with open(tmp_path / "plain.txt", "w") as file:
            file.write("plain")
    finally:
        os.umask(umask)
    assert os.stat(tmp_path / "new.txt").st_mode & 0o777 == os.stat(tmp_path / "plain.txt").st_mode & 0o777


def test_a_failure_mid_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "adapters.npz"
    path.write_bytes(b"old, whole")
    with pytest.raises(OSError, match="No space left"):
        with atomic_write(path) as temporary:
            with open(temporary, "wb") as file:
                file.write(b"new, trunc")
            raise OSError(28, "No space left on device")
    assert path.read_bytes() == b"old, whole"
    assert os.listdir(tmp_path) == ["adapters.npz"]


def test_a_failed_rename_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "adapters.npz"
    path.write_bytes(b"old")

    def failing(*args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="Input/output"):
        with atomic_write(path) as temporary:
            with open(temporary, "wb") as file:
                file.write(b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["adapters.npz"]


def fill(folder, config, weights):
    with open(os.path.join(folder, "config.json"), "w") as file:
        file.write(config)
    with open(os.path.join(folder, "model.weights.h5"), "w") as file:
        file.write(weights)


def contents(folder):
    return {name: (folder / name).read_text() for name in sorted(os.listdir(folder))}


def fail_rename(monkeypatch, call, folder):
    """Makes the `call`-th `os.rename`/`os.replace` of a path in `folder`
    fail; returns a list that holds the path once it has."""
    calls, failed = [], []

    def failing(real):
        def rename(source, destination):
            if os.fspath(source).startswith(os.fspath(folder)):
                calls.append(source)
                if len(calls) == call:
                    failed.append(source)
                    raise OSError(5, "Input/output error")
            return real(source, destination)

        return rename

    monkeypatch.setattr(os, "rename", failing(os.rename))
    monkeypatch.setattr(os, "replace", failing(os.replace))
    return failed


def test_a_directory_changes_as_a_whole_whichever_rename_fails(tmp_path, monkeypatch):
    """A failure at each rename of the switch leaves the folder wholly old
    (new weights beside an old config.json is the state to rule out), with
    no temporary folder beside it; the run that meets no failure leaves it
    wholly new, with the files it did not write carried over."""
    target = tmp_path / "converted"
    target.mkdir()
    fill(target, "old config", "old weights")
    (target / "tokenizer.json").write_text("kept")
    old = contents(target)
    call = 1
    while True:
        failed = fail_rename(monkeypatch, call, tmp_path)
        try:
            with atomic_directory(target) as staging:
                fill(staging, "new config", "new weights")
        except OSError:
            assert failed
            assert contents(target) == old, call
            assert os.listdir(tmp_path) == ["converted"], call
        else:
            assert not failed
            break
        finally:
            monkeypatch.undo()
        call += 1
    assert call > 2  # the switch took two renames, each failed once
    assert contents(target) == {
        "config.json": "new config", "model.weights.h5": "new weights", "tokenizer.json": "kept",
    }
    assert os.listdir(tmp_path) == ["converted"]


def test_a_directory_left_out_entries_and_a_failing_body(tmp_path):
    target = tmp_path / "converted"
    target.mkdir()
    fill(target, "old config", "old weights")
    (target / "model.safetensors").write_text("another checkpoint")
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as staging:
            fill(staging, "new config", "new weights")
            raise RuntimeError("interrupted")
    assert contents(target)["config.json"] == "old config"
    assert os.listdir(tmp_path) == ["converted"]

    with atomic_directory(target, leave_out=["model.safetensors"]) as staging:
        fill(staging, "new config", "new weights")
    assert contents(target) == {"config.json": "new config", "model.weights.h5": "new weights"}

    new = tmp_path / "new"
    with atomic_directory(new) as staging:
        fill(staging, "config", "weights")
    assert sorted(os.listdir(tmp_path)) == ["converted", "new"]
    with pytest.raises(NotADirectoryError, match="notes.txt"):
        (tmp_path / "notes.txt").write_text("a file")
        with atomic_directory(tmp_path / "notes.txt"):
            pass


CONFIG = {
    "vocab_size": 30, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32,
}


def test_save_lora_weights_failing_mid_write_keeps_the_previous_adapters(tmp_path, monkeypatch):
    """`save_lora_weights` wrote straight into its file: a failure mid-write
    left a truncated archive in place of good adapters."""
    model = keras_attn.build_transformer_model(CONFIG)
    enable_lora(model, rank=2)
    path = save_lora_weights(model, tmp_path / "adapters")
    before = pathlib.Path(path).read_bytes()

    def truncated(file, **arrays):
        with open(file, "wb") as handle:
            handle.write(before[:100])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", truncated)
    with pytest.raises(OSError, match="No space left"):
        save_lora_weights(model, tmp_path / "adapters")
    monkeypatch.undo()
    assert pathlib.Path(path).read_bytes() == before
    assert os.listdir(tmp_path) == ["adapters.npz"]
    load_lora_weights(model, path)  # still a whole archive
