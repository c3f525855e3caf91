"""`.weights.h5` files saved by Keras, loaded all or nothing."""

import os
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
        refused = bool(missing or mismatched or unused_paths)
        # The layer names are read only for a refusal's message.
        model_names = h5_layer_names(own, missing + common) if refused else None
    if refused:
        file_names = h5_layer_names(path, unused_paths + common)
        # Said only with a refusal: names alone may differ harmlessly
        # (layers Keras named automatically in another session).
        elsewhere = [
            f"{name}: the file's {file_names[name]}, the model's {model_names[name]}"
            for name in common
            if file_names[name] != model_names[name]
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
        )
    snapshot = [np.array(variable.numpy(), copy=True) for variable in model.weights]
    try:
        # Keras' own loading: `TransformerModel.load_weights` comes here.
        keras.Model.load_weights(model, path)
    except BaseException:
        for variable, value in zip(model.weights, snapshot):
            variable.assign(value)
        raise


def _named(paths, names):
    return [f"{path} ({names[path]})" if names.get(path) else path for path in paths]
