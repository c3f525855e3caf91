"""`.weights.h5` files saved by Keras, loaded all or nothing."""

import os
import tempfile

import numpy as np

from keras_attn.checkpoints.porting import refusal
from keras_attn.checkpoints.porting import warn_unused
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


def load_weights_file(model, path):
    """`model.load_weights(path)`, all or nothing, with Keras' own layout.

    Keras stores variables under paths of its choosing (`layers/dense_1/vars/0`,
    by layer class and order, not by layer name), so the file is compared
    with what this model itself writes: a path the model lacks is unused
    (warned), one the file lacks or a shape that differs is an error before
    anything is assigned. Keras then loads; should it still fail (a damaged
    dataset), every variable is restored from a snapshot taken before, so the
    guarantee does not depend on Keras' loading order.
    """
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
    mismatched = [
        f"{name}: model expects {expected[name]}, file has {stored[name]}"
        for name in sorted(set(expected) & set(stored))
        if tuple(expected[name]) != tuple(stored[name])
    ]
    unused = sorted(set(stored) - set(expected))
    if missing or mismatched:
        raise refusal(
            repr(path),
            model,
            [
                ("arrays the model needs and the file lacks", missing),
                ("shapes that disagree (a different config?)", mismatched),
                ("arrays in the file the model has no place for", unused),
            ],
        )
    snapshot = [np.array(variable.numpy(), copy=True) for variable in model.weights]
    try:
        model.load_weights(path)
    except BaseException:
        for variable, value in zip(model.weights, snapshot):
            variable.assign(value)
        raise
    warn_unused(unused, repr(path), model, "a larger model's weights?")
