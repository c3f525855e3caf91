"""keras_attn's numpy reader of TensorFlow checkpoints against TensorFlow's
own `tf.train.load_checkpoint`: the same names, shapes, dtypes and bytes;
damaged files are a `CheckpointError` naming the file.

The reader does not depend on Keras' backend; TensorFlow writes the files
and is the reference, and is imported by every backend's test run (Keras
seeds it). Loading without TensorFlow on JAX and torch is checked in
tests/test_startup.py.
"""

import hashlib
import os

import numpy as np
import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.checkpoints import open_checkpoint
from keras_attn.checkpoints.tensorflow_bundle import TensorBundle
from keras_attn.checkpoints.tensorflow_bundle import crc32c
from keras_attn.checkpoints.tensorflow_bundle import mask

tf = pytest.importorskip("tensorflow")

RNG = np.random.default_rng(54)


def save(prefix, arrays, slices=None):
    """`tf.raw_ops.SaveV2` of `{name: array or tf.Tensor}`, and of
    `slices`: `[(name, "full shape and slice spec", part)]` (a variable
    saved in slices, as partitioned variables are)."""
    names = list(arrays)
    specs = [""] * len(names)
    tensors = [tf.constant(value) for value in arrays.values()]
    for name, spec, part in slices or []:
        names.append(name)
        specs.append(spec)
        tensors.append(tf.constant(part))
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names, shape_and_slices=specs, tensors=tensors)
    return str(prefix)


def assert_reads_as_tensorflow(prefix):
    """Every variable of `prefix`, through `TensorBundle` and through
    TensorFlow: the same names and shapes, and the same dtype and bytes
    (bfloat16 as float32, which it widens to exactly; strings as bytes)."""
    reference = tf.train.load_checkpoint(prefix)
    shapes = reference.get_variable_to_shape_map()
    bundle = TensorBundle(prefix)
    assert bundle.names() == sorted(shapes)
    for name in bundle.names():
        assert bundle.shape(name) == tuple(shapes[name]), name
        mine, expected = bundle.read(name), np.asarray(reference.get_tensor(name))
        assert mine.shape == expected.shape, name
        if expected.dtype.kind in "SO":
            assert mine.dtype == object, name
            assert mine.tolist() == expected.astype(object).tolist(), name
            continue
        if expected.dtype.name == "bfloat16":
            expected = expected.astype(np.float32)
        assert mine.dtype == expected.dtype, name
        assert mine.tobytes() == expected.tobytes(), name
    return bundle


def every_dtype():
    floats = RNG.normal(size=(3, 5)).astype(np.float32)
    floats[0, :3] = [np.nan, -0.0, np.inf]
    return {
        "float32": floats,
        "float16": floats.astype(np.float16),
        "bfloat16": tf.constant(floats, tf.bfloat16),
        "float64": RNG.normal(size=(4,)),
        "int32": RNG.integers(-(2**31), 2**31, size=(2, 3), dtype=np.int32),
        "int64": np.array([-(2**63), 2**63 - 1, 0, 7], np.int64),
        "int8": np.array([-128, 127, 0], np.int8),
        "uint8": np.array([[0, 255], [1, 128]], np.uint8),
        "int16": np.array([-32768, 32767], np.int16),
        "bool": np.array([True, False, True]),
        "global_step": np.array(1000, np.int64),
        "scalar_float": np.float32(0.5),
        "empty": np.zeros((0, 3), np.float32),
        "string": np.array(b"bert"),
        "strings": np.array([[b"", b"a\x00b"], [b"\xff" * 300, b"z"]], object),
        "no_strings": tf.constant([], tf.string),
        # Over 1 MiB and of an odd size: the CRC's chunks, lanes and tail.
        "large": RNG.normal(size=(300_001,)).astype(np.float32),
    }


def test_every_dtype_reads_as_tensorflow_reads_it(tmp_path):
    prefix = save(tmp_path / "bert_model.ckpt", every_dtype())
    assert_reads_as_tensorflow(prefix)
    # The checkpoint reader widens half floats to float32, as for every format.
    reader = open_checkpoint(prefix)
    assert reader.format == "tensorflow"
    assert reader.read("float16").dtype == np.float32
    assert reader.read("bfloat16").dtype == np.float32


def test_object_based_checkpoint_as_tf_train_checkpoint_writes_it(tmp_path):
    """`tf.train.Checkpoint` names variables by object path and adds its
    object graph (a string) and save counter."""
    checkpoint = tf.train.Checkpoint(
        dense=tf.Variable(RNG.normal(size=(4, 3)).astype(np.float32)),
        step=tf.Variable(7, dtype=tf.int64),
    )
    prefix = checkpoint.write(str(tmp_path / "ckpt"))
    bundle = assert_reads_as_tensorflow(prefix)
    assert "_CHECKPOINTABLE_OBJECT_GRAPH" in bundle.names()


def test_sharded_checkpoint_with_a_variable_saved_in_slices(tmp_path):
    """Two data files (what a sharded saver writes, merged by
    `MergeV2Checkpoints`), and variables saved in slices across them; slice
    starts of 64 and more take several bytes in the slice's key."""
    whole = RNG.normal(size=(200, 3)).astype(np.float32)
    columns = RNG.normal(size=(4, 130)).astype(np.float32)
    first = save(
        tmp_path / "part-0", {"bert/pooler/dense/kernel": RNG.normal(size=(3, 3)).astype(np.float32)},
        slices=[("partitioned/w", "200 3 0,100:-", whole[:100]),
                ("partitioned/columns", "4 130 -:0,65", columns[:, :65])],
    )
    second = save(
        tmp_path / "part-1", {"bert/pooler/dense/bias": np.arange(3, dtype=np.float32)},
        slices=[("partitioned/w", "200 3 100,100:-", whole[100:]),
                ("partitioned/columns", "4 130 -:65,65", columns[:, 65:])],
    )
    prefix = str(tmp_path / "model.ckpt")
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=[first, second], destination_prefix=prefix)
    assert sorted(name for name in os.listdir(tmp_path) if ".data-" in name) == [
        "model.ckpt.data-00000-of-00002", "model.ckpt.data-00001-of-00002",
    ]
    bundle = assert_reads_as_tensorflow(prefix)
    np.testing.assert_array_equal(bundle.read("partitioned/w"), whole)
    np.testing.assert_array_equal(bundle.read("partitioned/columns"), columns)


def test_index_of_several_blocks_and_many_shared_prefixes(tmp_path):
    """2,500 names with long shared prefixes: the index holds several data
    blocks (TensorFlow's tables cut them at 256 KiB), each key stored as
    the part it does not share with the one before, with restart points."""
    names = [
        f"bert/encoder/layer_{index // 8}/attention_"
        f"{hashlib.sha256(str(index).encode()).hexdigest() * 3}/kernel_{index % 8}"
        for index in range(2500)
    ]
    prefix = save(tmp_path / "many", {name: np.float32(index) for index, name in enumerate(names)})
    assert os.path.getsize(prefix + ".index") > 2 * 256 * 1024
    assert_reads_as_tensorflow(prefix)


@pytest.fixture
def checkpoint(tmp_path):
    """A one-variable checkpoint: `(prefix, name)`."""
    name = "bert/embeddings/word_embeddings"
    return save(tmp_path / "bert_model.ckpt", {name: RNG.normal(size=(64, 8)).astype(np.float32)}), name


def rewrite(path, change):
    with open(path, "rb") as file:
        content = bytearray(file.read())
    change(content)
    with open(path, "wb") as file:
        file.write(content)


def flip(at):
    def change(content):
        content[at if at >= 0 else len(content) + at] ^= 0x10
    return change


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda content: content.__delitem__(slice(len(content) // 2, None)), "magic number"),
        (lambda content: content.__delitem__(slice(20, None)), "truncated"),
        (flip(-1), "magic number"),
        (flip(10), "checksum"),
    ],
    ids=["truncated", "shorter-than-its-footer", "bad-magic", "damaged-block"],
)
def test_damaged_index_is_named(checkpoint, change, message):
    prefix, _ = checkpoint
    rewrite(prefix + ".index", change)
    with pytest.raises(CheckpointError, match=message) as raised:
        open_checkpoint(prefix)
    assert repr(prefix + ".index") in str(raised.value)


def test_compressed_index_block_is_named(checkpoint):
    """TensorFlow writes checkpoint tables uncompressed; a block marked
    compressed (with a valid checksum) is refused by name."""
    prefix, _ = checkpoint

    def compress_first_block(content):
        # The footer starts with the metaindex block's offset, a varint: the
        # first data block (at 0) and its 5-byte trailer end there.
        offset, shift, position = 0, 0, len(content) - 48
        while True:
            offset |= (content[position] & 0x7F) << shift
            shift += 7
            position += 1
            if content[position - 1] < 0x80:
                break
        trailer = offset - 5
        content[trailer] = 1  # snappy
        content[trailer + 1: offset] = mask(crc32c(bytes(content[: trailer + 1]))).to_bytes(4, "little")

    rewrite(prefix + ".index", compress_first_block)
    with pytest.raises(CheckpointError, match="compressed") as raised:
        open_checkpoint(prefix)
    assert repr(prefix + ".index") in str(raised.value)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda content: content.__delitem__(slice(len(content) // 3, None)), "truncated"),
        (flip(1000), "damaged"),
    ],
    ids=["truncated", "flipped-byte"],
)
def test_damaged_data_file_is_named_with_the_variable(checkpoint, change, message):
    prefix, name = checkpoint
    data = prefix + ".data-00000-of-00001"
    rewrite(data, change)
    reader = open_checkpoint(prefix)
    with pytest.raises(CheckpointError, match=message) as raised:
        reader.read(name)
    assert repr(data) in str(raised.value) and repr(name) in str(raised.value)


def test_missing_data_file_is_named(checkpoint):
    prefix, _ = checkpoint
    os.remove(prefix + ".data-00000-of-00001")
    with pytest.raises(FileNotFoundError, match="data-00000-of-00001"):
        open_checkpoint(prefix)


def test_crc32c_check_values():
    """CRC32C's standard check value, and TensorFlow's masking of it."""
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"56789", crc32c(b"1234")) == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert mask(0) == 0xA282EAD8
