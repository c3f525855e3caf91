"""Read-only access to checkpoint files: name -> numpy array, whatever the format.

Formats: TensorFlow name-based checkpoints (Google's BERT release, read
without TensorFlow by `tensorflow_bundle`), safetensors
files (read with safetensors' numpy API, no torch needed), PyTorch `.bin`
files (read with `weights_only=True`), their sharded `*.index.json` sets, and
Hugging Face directories holding any of these.
"""

import json
import os
import re

import numpy as np


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the model."""


class UnusedWeightsWarning(UserWarning):
    """A checkpoint holds weights the model did not load (listed in the message).

    Silence it deliberately with
    `warnings.filterwarnings("ignore", category=UnusedWeightsWarning)`.
    """


class SkippedWeightsWarning(UserWarning):
    """Model weights the checkpoint lacks were left at their initial values,
    as `skip_missing` allowed (listed in the message)."""


def _as_numpy(array):
    array = np.asarray(array)
    # bfloat16 (an ml_dtypes type) and float16 are widened so that every
    # consumer sees a standard float type.
    if array.dtype.kind == "V" or array.dtype.name in ("bfloat16", "float16"):
        array = array.astype(np.float32)
    return array


class CheckpointReader:
    """Name -> numpy array access to one checkpoint.

    Attributes:
        path: what was opened (file, prefix or directory).
        format: `"tensorflow"`, `"safetensors"` or `"torch"`.
    """

    format = None

    def __init__(self, path):
        self.path = path

    def names(self):
        """Every stored variable name, sorted."""
        raise NotImplementedError

    def shape(self, name):
        """The stored shape of `name`, without reading its data."""
        raise NotImplementedError

    def read(self, name):
        """The array stored under `name` (half floats widened to float32)."""
        raise NotImplementedError

    def __contains__(self, name):
        raise NotImplementedError

    def _unknown(self, name):
        return KeyError(f"{name!r} is not stored in checkpoint {self.path!r}.")


class TensorFlowReader(CheckpointReader):
    """A TensorFlow checkpoint (Google's `bert_model.ckpt`, what
    `tf.train.Checkpoint` or `tf.compat.v1.train.Saver` writes), read with
    numpy alone (`tensorflow_bundle.TensorBundle`): no TensorFlow is needed
    or imported, on any backend. Each read checks the variable's CRC32C.

    Raises (when opened):
        CheckpointError: the `.index` file is truncated or damaged.
        FileNotFoundError: a data file the index names is missing.
    """

    format = "tensorflow"

    def __init__(self, prefix):
        super().__init__(prefix)
        # Imported here: tensorflow_bundle raises this module's CheckpointError.
        from keras_attn.checkpoints.tensorflow_bundle import TensorBundle

        self._bundle = TensorBundle(prefix)

    def names(self):
        return self._bundle.names()

    def __contains__(self, name):
        return name in self._bundle

    def shape(self, name):
        if name not in self._bundle:
            raise self._unknown(name)
        return self._bundle.shape(name)

    def read(self, name):
        if name not in self._bundle:
            raise self._unknown(name)
        return _as_numpy(self._bundle.read(name))


class _ShardedReader(CheckpointReader):
    """Shared logic of formats stored as one file or as shards with an index."""

    def __init__(self, path, files):
        super().__init__(path)
        self._shard_of = {}
        for file in files:
            for name in self._open_shard(file):
                self._shard_of[name] = file

    def names(self):
        return sorted(self._shard_of)

    def __contains__(self, name):
        return name in self._shard_of

    def _file_of(self, name):
        if name not in self._shard_of:
            raise self._unknown(name)
        return self._shard_of[name]


class SafetensorsReader(_ShardedReader):
    """One `.safetensors` file or a sharded set, via safetensors' numpy API."""

    format = "safetensors"

    def __init__(self, path, files):
        self._handles = {}
        super().__init__(path, files)

    def _open_shard(self, file):
        from safetensors import safe_open

        try:
            handle = safe_open(file, framework="np")
            self._handles[file] = handle
            return list(handle.keys())
        except Exception as error:  # safetensors raises its own SafetensorError
            raise CheckpointError(
                f"Cannot read safetensors file {file!r}; it looks truncated or "
                f"corrupt: {error}"
            ) from error

    def shape(self, name):
        handle = self._handles[self._file_of(name)]
        return tuple(handle.get_slice(name).get_shape())

    def read(self, name):
        file = self._file_of(name)
        try:
            return _as_numpy(self._handles[file].get_tensor(name))
        except Exception as error:
            raise CheckpointError(
                f"Cannot read {name!r} from safetensors file {file!r}; it looks "
                f"truncated or corrupt: {error}"
            ) from error


class TorchReader(_ShardedReader):
    """A PyTorch state dict (`pytorch_model.bin`) or a sharded set, loaded
    with `weights_only=True` so that no pickled code runs."""

    format = "torch"

    def __init__(self, path, files):
        self._arrays = {}
        super().__init__(path, files)

    def _open_shard(self, file):
        try:
            import torch
        except ImportError as error:
            raise ImportError(
                f"Reading the PyTorch file {file!r} needs torch: "
                'pip install torch (in a keras_attn clone: pip install -e ".[torch]" '
                "-c constraints.txt), or convert it to safetensors."
            ) from error
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except Exception as error:
            raise CheckpointError(
                f"Cannot read PyTorch file {file!r}; it looks truncated or "
                f"corrupt, or holds more than tensors: {error}"
            ) from error
        if not isinstance(state, dict):
            raise CheckpointError(
                f"PyTorch file {file!r} does not hold a state dict (name -> tensor); "
                f"it holds a {type(state).__name__}."
            )
        others = [
            f"{name!r} ({type(value).__name__})"
            for name, value in state.items()
            if not (isinstance(name, str) and isinstance(value, torch.Tensor))
        ]
        if others:
            raise CheckpointError(
                f"PyTorch file {file!r} is not a flat state dict of tensors: "
                f"entries {', '.join(others)} are not tensors. Save "
                "`model.state_dict()` itself, not a dict around it."
            )
        for name, tensor in state.items():
            self._arrays[name] = tensor.detach().to(torch.float32) if tensor.is_floating_point() else tensor
        return list(state)

    def shape(self, name):
        self._file_of(name)
        return tuple(self._arrays[name].shape)

    def read(self, name):
        self._file_of(name)
        return _as_numpy(self._arrays[name].numpy())


def _shards_from_index(index_path):
    try:
        with open(index_path, encoding="utf-8") as file:
            weight_map = json.load(file)["weight_map"]
    except (OSError, ValueError, KeyError) as error:
        raise CheckpointError(
            f"Cannot read shard index {index_path!r}: {error}"
        ) from error
    directory = os.path.dirname(index_path)
    files = []
    for shard in weight_map.values():
        path = os.path.join(directory, shard)
        if path not in files:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Shard {path!r} listed in {index_path!r} does not exist.")
            files.append(path)
    return files


def _is_tf_prefix(path):
    return os.path.isfile(path + ".index")


# In a directory, the first of these that exists is read.
DIRECTORY_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def _tf_prefix_in(directory):
    """The TensorFlow checkpoint in `directory`: the one its `checkpoint`
    state file names (TensorFlow's "latest"), else the only `*.index`."""
    state = os.path.join(directory, "checkpoint")
    if os.path.isfile(state):
        # Read as TensorFlow writes it (a text protobuf), without TensorFlow.
        with open(state, encoding="utf-8") as file:
            match = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', file.read(), re.M)
        if match is None:
            raise CheckpointError(
                f"TensorFlow state file {state!r} names no `model_checkpoint_path`."
            )
        prefix = os.path.join(directory, match.group(1))
        if not _is_tf_prefix(prefix):
            raise FileNotFoundError(
                f"TensorFlow state file {state!r} names checkpoint {prefix!r}, "
                f"whose {prefix + '.index'!r} does not exist."
            )
        return prefix
    prefixes = sorted(name[: -len(".index")] for name in os.listdir(directory) if name.endswith(".index"))
    if len(prefixes) > 1:
        raise CheckpointError(
            f"Several TensorFlow checkpoints found in directory {directory!r}: "
            f"{prefixes}; pass the prefix of one, e.g. "
            f"{os.path.join(directory, prefixes[-1])!r}."
        )
    if prefixes:
        return os.path.join(directory, prefixes[0])
    return None


def open_checkpoint(path):
    """Opens a checkpoint of any supported format.

    Args:
        path: a TensorFlow checkpoint prefix (`.../bert_model.ckpt`), a
            `.safetensors` file, a PyTorch `.bin`/`.pt` file, a
            `*.index.json` shard index, or a directory holding one of these
            (Hugging Face layout first, then a TensorFlow checkpoint).

    Returns:
        A `CheckpointReader`.

    Raises:
        FileNotFoundError: nothing readable at `path`, or a shard or
            checkpoint that an index or state file names is missing.
        CheckpointError: a file that is truncated or corrupt, a `.bin`
            holding more than tensors, a directory with several TensorFlow
            checkpoints and no state file choosing one.
        ImportError: a PyTorch `.bin` file and torch is not installed
            (TensorFlow checkpoints need no TensorFlow).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        for name in DIRECTORY_FILES:
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return open_checkpoint(candidate)
        prefix = _tf_prefix_in(path)
        if prefix is not None:
            return TensorFlowReader(prefix)
        raise FileNotFoundError(
            f"No checkpoint in directory {path!r}: looked for "
            f"{', '.join(DIRECTORY_FILES)} or a TensorFlow checkpoint (*.index); "
            f"it holds {sorted(os.listdir(path))}."
        )
    if _is_tf_prefix(path):
        return TensorFlowReader(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Checkpoint {path!r} does not exist.")
    if path.endswith(".safetensors.index.json"):
        return SafetensorsReader(path, _shards_from_index(path))
    if path.endswith(".bin.index.json"):
        return TorchReader(path, _shards_from_index(path))
    if path.endswith(".safetensors"):
        return SafetensorsReader(path, [path])
    if path.endswith((".bin", ".pt", ".pth")):
        return TorchReader(path, [path])
    if path.endswith(".index"):
        return TensorFlowReader(path[: -len(".index")])
    raise CheckpointError(
        f"Unrecognised checkpoint {path!r}: expected a TensorFlow checkpoint "
        "prefix, .safetensors, .bin/.pt, a *.index.json shard index, or a directory."
    )
