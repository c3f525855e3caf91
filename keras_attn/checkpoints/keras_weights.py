"""`.weights.h5` files saved by Keras, loaded all or nothing."""

import os
import re
import tempfile

import numpy as np

from keras_attn.checkpoints.porting import refusal
from keras_attn.checkpoints.readers import CheckpointError


def h5_datasets(path):
    """Dataset path -> shape of every array in an `.h5` file."""
    import h5py

    shapes = {}
    with h5py.File(path, "r") as file:
        file.visititems(
            lambda name, item: shapes.__setitem__(name, item.shape)
            if isinstance(item, h5py.Dataset)
            else None
        )
    return shapes


def h5_layer_names(path, datasets):
    """Dataset path -> the names of the layers holding it, as Keras records
    them (a `name` attribute on each layer's `vars` group):
    `layers/multi_head_attention_1/key_dense/vars/0` ->
    `Transformer-1-MultiHeadSelfAttention/key_dense`."""
    import h5py

    names = {}
    with h5py.File(path, "r") as file:
        for dataset in datasets:
            parts = dataset.split("/")[:-2]  # without "vars/<index>"
            chain = []
            for end in range(1, len(parts) + 1):
                group = file.get("/".join(parts[:end] + ["vars"]))
                name = None if group is None else group.attrs.get("name")
                if name is not None:
                    chain.append(name.decode() if isinstance(name, bytes) else str(name))
            names[dataset] = "/".join(chain)
    return names


def load_weights_file(model, path):
    """`model.load_weights(path)`, all or nothing, with Keras' own layout.

    Keras stores variables under paths of its choosing (`layers/dense_1/vars/0`,
    by layer class and order, not by layer name), so the file is compared
    with what this model itself writes, before anything is assigned: an
    array the model needs and the file lacks, or a shape that differs, is a
    `CheckpointError` (a ValueError) listing each path with the names of its
    layers. So is an array the model has no place for (a file saved from a
    larger model): as paths count the layers of each class in order, Keras
    would give the layers after the extra ones the wrong arrays (a 1-layer
    model's `MLM-Norm` would read a 2-layer file's
    `Transformer-1-MultiHeadSelfAttention-Norm`) and drop the rest silently.
    So is a path both have whose layers the file and the model name
    differently, both by name given on purpose (GPT-2's `Output-Norm` and
    GPT2-ML's `Embedding-Norm`: a file of another variant); Keras' automatic
    names (`dense_3`) may differ between sessions and are not compared, nor
    is a builder `prefix` (a `Successor-` model's file loads into the same
    model built without it, and the other way round).
    Keras then loads; should it still fail (a damaged dataset), every
    variable is restored from a snapshot taken before, so the guarantee does
    not depend on Keras' loading order.
    """
    import keras

    if not os.path.isfile(path):
        raise FileNotFoundError(f"Weights file {path!r} does not exist.")
    try:
        stored = h5_datasets(path)
    except OSError as error:
        raise CheckpointError(f"Cannot read weights file {path!r}: {error}") from error
    with tempfile.TemporaryDirectory() as directory:
        own = os.path.join(directory, "model.weights.h5")
        model.save_weights(own)
        expected = h5_datasets(own)
        missing = sorted(set(expected) - set(stored))
        common = sorted(set(expected) & set(stored))
        mismatched = [
            f"{name}: model expects {expected[name]}, file has {stored[name]}"
            for name in common
            if tuple(expected[name]) != tuple(stored[name])
        ]
        unused_paths = sorted(set(stored) - set(expected))
        model_names = h5_layer_names(own, missing + common)
    file_names = h5_layer_names(path, unused_paths + common)
    # Arrays Keras would give to a differently named layer: a refusal when
    # both layers were named on purpose (this library's `Embedding-Norm`,
    # `Output-Norm`: a file of another variant whose layers happen to line
    # up by class and order, GPT-2's into GPT2-ML); said only beside
    # another refusal when a name is Keras' own (`dense_3`, which differs
    # harmlessly between sessions).
    renamed = [name for name in common if file_names[name] != model_names[name]]
    other_layers = [
        name for name in renamed
        if _named_on_purpose(file_names[name]) and _named_on_purpose(model_names[name])
        and not _same_but_prefix(file_names[name], model_names[name])
    ]
    refused = bool(missing or mismatched or unused_paths or other_layers)
    if refused:
        elsewhere = [
            f"{name}: the file's {file_names[name]}, the model's {model_names[name]}"
            for name in renamed
        ]
        raise refusal(
            repr(path),
            model,
            [
                ("arrays the model needs and the file lacks",
                 _named(missing, model_names)),
                ("shapes that disagree (a different config?)", mismatched),
                ("arrays in the file the model has no place for",
                 _named(unused_paths, file_names)),
                ("paths both have, of different layers (Keras counts layers by class)",
                 elsewhere),
            ],
            hint=(
                "The file was saved from a model with other layers (another variant or "
                "configuration?); load it into a model built as the one that saved it."
                if other_layers else None
            ),
        )
    snapshot = [np.array(variable.numpy(), copy=True) for variable in model.weights]
    try:
        # Keras' own loading: `TransformerModel.load_weights` comes here.
        keras.Model.load_weights(model, path)
    except BaseException:
        for variable, value in zip(model.weights, snapshot):
            variable.assign(value)
        raise


def _named_on_purpose(layer_names):
    """Whether the outermost layer of a `/`-joined chain of layer names was
    named by its builder, not by Keras (whose automatic names are
    snake_case, `dense_3`)."""
    outermost = layer_names.split("/")[0]
    return bool(outermost) and re.fullmatch(r"[a-z0-9_]+", outermost) is None


def _same_but_prefix(first, second):
    """Whether two layer names differ only by a builder `prefix`
    (`Successor-Transformer-0-FeedForward` and `Transformer-0-FeedForward`):
    the same layer of the same model, renamed to share a graph."""
    first, second = first.split("/")[0], second.split("/")[0]
    return first.endswith(second) or second.endswith(first)


def _named(paths, names):
    return [f"{path} ({names[path]})" if names.get(path) else path for path in paths]
