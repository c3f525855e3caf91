"""LoRA adapters on the projections of `MultiHeadAttention` and `FeedForward`."""

import math
import numbers
import os
import zipfile
import zlib

import keras
import numpy as np

from keras_attn import keras_internals
from keras_attn.files import atomic_write
from keras_attn.layers.feed_forward import FeedForward
from keras_attn.layers.multi_head_attention import MultiHeadAttention

# The attention layers' own `dense_projections` say which they have.
ATTENTION_PROJECTIONS = MultiHeadAttention.dense_projections
FEED_FORWARD_PROJECTIONS = ("intermediate_dense", "output_dense")
# A gated feed-forward's (T5 v1.1's) third projection, `V` in `act(x W) * (x V)`.
GATE_PROJECTION = "gate_dense"
ADAPTER_VARIABLES = ("lora_kernel_a", "lora_kernel_b")

# How the files `load_lora_weights` may be given start: an `.npz` is a zip
# archive; the others are named in the error when given instead.
ZIP_SIGNATURE = b"PK\x03\x04"
OTHER_SIGNATURES = {
    b"\x89HDF\r\n\x1a\n": "an HDF5 file (a Keras `.weights.h5`? load those with model.load_weights)",
    b"\x93NUMPY": "a single NumPy array (`.npy`), not an `.npz` archive",
}


def _projections(model, feed_forward=True):
    """`(name, Dense)` for every projection LoRA can adapt in `model`, named
    `"{layer}/{projection}"` (e.g. `"Transformer-0-MultiHeadSelfAttention/query_dense"`),
    the same in every model built from one config."""
    for layer in keras_internals.all_layers(model):
        if isinstance(layer, MultiHeadAttention):
            names = layer.dense_projections
        elif isinstance(layer, FeedForward) and feed_forward:
            names = FEED_FORWARD_PROJECTIONS + ((GATE_PROJECTION,) if layer.gated else ())
        else:
            continue
        for name in names:
            yield f"{layer.name}/{name}", getattr(layer, name)


def _adapted(model):
    """`(name, Dense)` for the projections of `model` that have adapters."""
    return [(name, dense) for name, dense in _projections(model) if dense.lora_enabled]


def enable_lora(model, rank, feed_forward=False, alpha=None):
    """Adds LoRA adapters to `model` and makes them its only trainable weights.

    Every attention projection (of each `keras_attn.MultiHeadAttention`,
    cross-attention, talking-heads and T-TA included, and a
    `GatedAttentionUnit`'s) and, with `feed_forward=True`, every `FeedForward`
    projection gets Keras' adapters (`Dense.enable_lora`): the kernel `W`
    computes `W + (alpha / rank) * A @ B`, `B` starting at zeros so the model
    starts out unchanged (Hu et al., 2021, https://arxiv.org/abs/2106.09685).
    Every other variable is frozen; layers created afterwards stay trainable.
    Calling it again with the same rank only freezes again.

    Args:
        model: a built model from `keras_attn.build_transformer_model`, or
            containing one.
        rank: the adapters' rank, a positive integer.
        feed_forward: also adapt the feed-forward projections.
        alpha: LoRA's scale numerator, finite and positive; defaults to `rank`.

    Returns:
        The number of adapter weights added.

    Raises:
        TypeError: `alpha` is not a real number.
        ValueError: a bad `rank` or `alpha`, no attention layer, or adapters of
            another rank already there.
    """
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ValueError(f"enable_lora: `rank` must be a positive integer; received {rank!r}.")
    if alpha is not None:
        if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, numbers.Real):
            raise TypeError(
                "enable_lora: `alpha` must be a finite positive real number (or None for "
                f"`rank`); received {alpha!r} ({type(alpha).__name__})."
            )
        if not math.isfinite(alpha) or alpha <= 0:
            raise ValueError(
                "enable_lora: `alpha` must be a finite positive real number (or None for "
                f"`rank`); received {alpha!r}."
            )
    projections = list(_projections(model, feed_forward))
    if not projections:
        raise ValueError(
            f"enable_lora: model {model.name!r} has no keras_attn.MultiHeadAttention "
            "layer to adapt; pass a model built by keras_attn.build_transformer_model."
        )
    for name, dense in projections:
        if dense.lora_enabled:
            if dense.lora_rank != rank:
                raise ValueError(
                    f"enable_lora: {name} already has LoRA adapters of rank "
                    f"{dense.lora_rank}; received rank={rank}."
                )
            continue
        dense.enable_lora(rank, lora_alpha=alpha)
    adapters = {id(v) for _, dense in _adapted(model) for v in _adapter_variables(dense)}
    for variable in model.variables:
        variable.trainable = id(variable) in adapters
    # A compiled model traced its train step with the old variables.
    model.train_function = model.test_function = model.predict_function = None
    return sum(int(np.prod(v.shape)) for _, dense in projections for v in _adapter_variables(dense))


def _adapter_variables(dense):
    return [getattr(dense, name) for name in ADAPTER_VARIABLES]


def save_lora_weights(model, path):
    """Writes the LoRA adapters of `model`, and nothing else, to the `.npz`
    `path` (`.npz` appended if missing), whole (`keras_attn.files.atomic_write`):
    `name/lora_kernel_a`, `name/lora_kernel_b` and `name/lora_alpha` per adapted
    projection `name`. Returns the path written; ValueError when `model` has no
    adapters, OSError when the file cannot be written."""
    adapted = _adapted(model)
    if not adapted:
        raise ValueError(
            f"save_lora_weights: model {model.name!r} has no LoRA adapters; "
            "call keras_attn.lora.enable_lora(model, rank) first."
        )
    arrays = {}
    for name, dense in adapted:
        for variable_name, variable in zip(ADAPTER_VARIABLES, _adapter_variables(dense)):
            arrays[f"{name}/{variable_name}"] = keras.ops.convert_to_numpy(variable)
        arrays[f"{name}/lora_alpha"] = np.asarray(dense.lora_alpha, "float64")
    path = _npz_path(path)
    with atomic_write(path) as temporary:
        np.savez(temporary, **arrays)
    return path


def _npz_path(path):
    """`path` as `np.savez` writes it: `.npz` appended if missing."""
    path = os.fspath(path)
    return path if path.endswith(".npz") else path + ".npz"


def load_lora_weights(model, path):
    """Loads adapters written by `save_lora_weights` (at `path`, or the path given
    to it) into `model`, which must have the same adapters (`enable_lora` with
    the same rank, `feed_forward` and `alpha`). Nothing is assigned unless all
    names, shapes and scales match.

    Raises:
        FileNotFoundError: neither `path` nor `path + ".npz"` exists.
        ValueError: `model` has no adapters, the file is not an `.npz` archive,
            or an adapter is missing on either side or differs (the message
            names it and both values).
    """
    path = _existing_adapter_file(path)
    adapted = _adapted(model)
    if not adapted:
        raise ValueError(
            f"load_lora_weights: model {model.name!r} has no LoRA adapters to load "
            f"{path!r} into; call keras_attn.lora.enable_lora(model, rank) first."
        )
    stored = _read_adapter_file(path)
    expected = {}
    for name, dense in adapted:
        for variable_name, variable in zip(ADAPTER_VARIABLES, _adapter_variables(dense)):
            expected[f"{name}/{variable_name}"] = variable
    stored_variables = {key for key in stored if not key.endswith("/lora_alpha")}
    missing = sorted(set(expected) - stored_variables)
    if missing:
        raise ValueError(
            f"load_lora_weights: {path!r} has no adapter variable {missing[0]!r} "
            f"({len(missing)} missing in all); were the adapters saved from a model "
            "with the same layers and `feed_forward` setting?"
        )
    unexpected = sorted(stored_variables - set(expected))
    if unexpected:
        raise ValueError(
            f"load_lora_weights: {path!r} holds adapter variable {unexpected[0]!r}, "
            f"which model {model.name!r} does not have ({len(unexpected)} such in "
            "all); enable LoRA on the same projections (`feed_forward`) first."
        )
    for key, variable in expected.items():
        if tuple(stored[key].shape) != tuple(variable.shape):
            raise ValueError(
                f"load_lora_weights: adapter variable {key!r} has shape "
                f"{tuple(stored[key].shape)} in {path!r}, but the model's has shape "
                f"{tuple(variable.shape)} (a different LoRA rank?)."
            )
    for name, dense in adapted:
        if f"{name}/lora_alpha" not in stored:
            raise ValueError(
                f"load_lora_weights: {path!r} has no entry {name + '/lora_alpha'!r}, the "
                "scale of that adapter; save_lora_weights writes one per adapted "
                "projection (was the file written by another tool?)."
            )
        alpha = float(stored[f"{name}/lora_alpha"])
        if alpha != dense.lora_alpha:
            raise ValueError(
                f"load_lora_weights: {name!r} has lora_alpha {alpha} in {path!r}, "
                f"but the model's is {dense.lora_alpha}; pass the same `alpha` to "
                "enable_lora."
            )
    for key, variable in expected.items():
        variable.assign(stored[key])


def _existing_adapter_file(path):
    """`path`, else `path + ".npz"`; FileNotFoundError when neither exists."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    if os.path.isfile(_npz_path(path)):
        return _npz_path(path)
    tried = " or ".join(repr(candidate) for candidate in dict.fromkeys([path, _npz_path(path)]))
    raise FileNotFoundError(f"load_lora_weights: no adapter file at {tried}.")


def _read_adapter_file(path):
    """Every array of the `.npz` at `path`; ValueError when it is not one."""
    with open(path, "rb") as file:
        start = file.read(8)
    if not start.startswith(ZIP_SIGNATURE):
        found = next(
            (what for signature, what in OTHER_SIGNATURES.items() if start.startswith(signature)),
            f"a file starting with the bytes {start!r}" if start else "an empty file",
        )
        raise ValueError(
            f"load_lora_weights: {path!r} is {found}; LoRA adapters are read from the "
            "NumPy `.npz` archive that save_lora_weights writes."
        )
    try:
        with np.load(path) as archive:
            return {key: archive[key] for key in archive.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as error:
        raise ValueError(
            f"load_lora_weights: {path!r} is not a complete `.npz` archive (truncated "
            f"or corrupted? {type(error).__name__}: {error}); write it again with "
            "save_lora_weights."
        ) from None


def merge_lora(model):
    """Folds the adapters of `model` into its kernels and removes them.

    Each adapted kernel becomes `W + (alpha / rank) * A @ B`: the model computes
    the same (to float32 rounding) as a plain model, ready to `save`,
    `quantize` or export. Returns the number of projections merged; ValueError
    when `model` has no adapters or an adapted projection is quantized."""
    adapted = _adapted(model)
    if not adapted:
        raise ValueError(
            f"merge_lora: model {model.name!r} has no LoRA adapters to merge."
        )
    for name, dense in adapted:
        if dense.quantization_mode is not None:
            raise ValueError(
                f"merge_lora: {name} is quantized ({dense.quantization_mode}); merge "
                "the adapters before `model.quantize`."
            )
    for _, dense in adapted:
        # With adapters, `Dense.kernel` is the merged kernel.
        merged = keras.ops.convert_to_numpy(dense.kernel)
        for attribute in ADAPTER_VARIABLES:
            keras_internals.drop_variable(dense, attribute)
        dense.lora_enabled = False
        dense.lora_rank = None
        dense.lora_alpha = None
        # Without adapters, `Dense.kernel` is the stored kernel variable.
        dense.kernel.assign(merged)
    keras_internals.sync_torch_parameters(model)
    model.train_function = model.test_function = model.predict_function = None
    return len(adapted)
