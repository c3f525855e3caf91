import json
import os
import sys

import numpy as np
import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.checkpoints import open_checkpoint

RNG = np.random.default_rng(3)
ARRAYS = {
    "bert/embeddings/word_embeddings": RNG.normal(size=(7, 4)).astype("float32"),
    "bert/encoder/layer_0/attention/self/query/kernel": RNG.normal(size=(4, 4)).astype("float32"),
    "cls/predictions/output_bias": RNG.normal(size=(7,)).astype("float32"),
}


def assert_reads_back(reader, arrays):
    assert reader.names() == sorted(arrays)
    for name, value in arrays.items():
        assert name in reader
        assert reader.shape(name) == value.shape
        np.testing.assert_array_equal(reader.read(name), value)
    with pytest.raises(KeyError, match=reader.path):
        reader.read("no/such/variable")


def write_tf(prefix, arrays):
    tf = pytest.importorskip("tensorflow")
    names = sorted(arrays)
    tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
        tensors=[tf.constant(arrays[n]) for n in names],
    )
    return prefix


def test_tensorflow_prefix_and_directory(tmp_path):
    arrays = dict(ARRAYS, global_step=np.array(5, np.int64))
    prefix = write_tf(str(tmp_path / "bert_model.ckpt"), arrays)
    reader = open_checkpoint(prefix)
    assert reader.format == "tensorflow"
    assert_reads_back(reader, arrays)
    assert open_checkpoint(str(tmp_path)).names() == sorted(arrays)


def test_truncated_tensorflow_data_is_named(tmp_path):
    prefix = write_tf(str(tmp_path / "model.ckpt"), ARRAYS)
    data = prefix + ".data-00000-of-00001"
    with open(data, "r+b") as file:
        file.truncate(os.path.getsize(data) // 3)
    with pytest.raises(CheckpointError, match="model.ckpt"):
        reader = open_checkpoint(prefix)
        for name in reader.names():
            reader.read(name)


def test_safetensors_file_and_shards(tmp_path):
    from safetensors.numpy import save_file

    path = str(tmp_path / "model.safetensors")
    save_file(ARRAYS, path)
    reader = open_checkpoint(path)
    assert reader.format == "safetensors"
    assert_reads_back(reader, ARRAYS)

    names = sorted(ARRAYS)
    shards = {"a.safetensors": names[:1], "b.safetensors": names[1:]}
    for shard, members in shards.items():
        save_file({n: ARRAYS[n] for n in members}, str(tmp_path / shard))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {n: s for s, ms in shards.items() for n in ms}}))
    assert_reads_back(open_checkpoint(str(index)), ARRAYS)


def test_half_precision_is_widened_to_float32(tmp_path):
    from safetensors.numpy import save_file

    path = str(tmp_path / "half.safetensors")
    save_file({"w": ARRAYS["cls/predictions/output_bias"].astype(np.float16)}, path)
    value = open_checkpoint(path).read("w")
    assert value.dtype == np.float32
    np.testing.assert_allclose(value, ARRAYS["cls/predictions/output_bias"], atol=1e-3)


def test_truncated_safetensors_is_named(tmp_path):
    from safetensors.numpy import save_file

    path = str(tmp_path / "model.safetensors")
    save_file(ARRAYS, path)
    with open(path, "r+b") as file:
        file.truncate(os.path.getsize(path) - 20)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        reader = open_checkpoint(path)
        for name in reader.names():
            reader.read(name)


def test_torch_file_and_directory(tmp_path):
    torch = pytest.importorskip("torch")
    state = {name: torch.tensor(value) for name, value in ARRAYS.items()}
    state["bf16"] = torch.ones(3, dtype=torch.bfloat16)
    path = str(tmp_path / "pytorch_model.bin")
    torch.save(state, path)
    reader = open_checkpoint(str(tmp_path))
    assert reader.format == "torch"
    assert_reads_back(reader, dict(ARRAYS, bf16=np.ones(3, np.float32)))


def test_corrupt_torch_file_is_named(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(b"not a zip archive at all")
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        open_checkpoint(str(path))


def test_missing_and_unreadable_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        open_checkpoint(str(tmp_path / "nothing-here"))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(FileNotFoundError, match="notes.txt"):
        open_checkpoint(str(tmp_path))
    with pytest.raises(CheckpointError, match="notes.txt"):
        open_checkpoint(str(tmp_path / "notes.txt"))


@pytest.mark.parametrize(
    "state, named",
    [
        (lambda torch: {"a": torch.zeros(2), "meta": "x"}, "'meta' (str)"),
        (lambda torch: {"model": {"a": torch.zeros(2)}}, "'model' (dict)"),
    ],
)
def test_torch_file_with_non_tensor_entries_is_named(tmp_path, state, named):
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "pytorch_model.bin")
    torch.save(state(torch), path)
    with pytest.raises(CheckpointError) as raised:
        open_checkpoint(path)
    assert named in str(raised.value) and "pytorch_model.bin" in str(raised.value)


TF_ARRAYS = {"bert/embeddings/word_embeddings": np.ones((3, 2), "float32")}


def test_tensorflow_directory_reads_without_tensorflow(tmp_path, monkeypatch):
    """A `[jax]` or `[torch]` install reads Google's checkpoints: the
    reader is numpy alone (it needed TensorFlow, and said to install it)."""
    write_tf(str(tmp_path / "model.ckpt-5"), TF_ARRAYS)
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "model.ckpt-5"\nall_model_checkpoint_paths: "model.ckpt-5"\n'
    )
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # importing it fails
    reader = open_checkpoint(str(tmp_path))
    assert reader.path == str(tmp_path / "model.ckpt-5")
    assert_reads_back(reader, TF_ARRAYS)


def test_directory_with_several_tensorflow_checkpoints(tmp_path):
    write_tf(str(tmp_path / "model.ckpt-5"), TF_ARRAYS)
    write_tf(str(tmp_path / "model.ckpt-9"), TF_ARRAYS)
    with pytest.raises(CheckpointError, match="Several") as raised:
        open_checkpoint(str(tmp_path))
    assert "model.ckpt-5" in str(raised.value) and "model.ckpt-9" in str(raised.value)
    # A state file chooses one, as TensorFlow's latest_checkpoint does.
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-5"\n')
    assert open_checkpoint(str(tmp_path)).path == str(tmp_path / "model.ckpt-5")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-7"\n')
    with pytest.raises(FileNotFoundError, match="model.ckpt-7"):
        open_checkpoint(str(tmp_path))
