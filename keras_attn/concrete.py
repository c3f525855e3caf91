"""Telling concrete tensors (values known now) from traced ones."""

import keras
import numpy as np


def concrete_values(x):
    """`x` as a numpy array when its values are known now (numpy data, an
    eager tensor), or None for a symbolic or traced tensor (Keras, TensorFlow
    graph, JAX trace, `torch.compile`, a CUDA graph's capture)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    if isinstance(x, keras.KerasTensor):
        return None
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        if tf.is_tensor(x) and tf.is_symbolic_tensor(x):
            return None
    elif backend == "jax":
        import jax

        if isinstance(x, jax.core.Tracer):
            return None
    elif torch_compiling() or torch_capturing():
        return None
    return np.asarray(keras.ops.convert_to_numpy(x))


def torch_capturing():
    """Whether torch runs what a CUDA graph records (`cuda_graph.recording`, or
    any capture on the current stream), where reading values would break the
    capture. False on the other backends."""
    if keras.config.backend() != "torch":
        return False
    import torch

    from keras_attn.torch_runtime import cuda_graph

    return cuda_graph.is_recording() or (
        torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    )


def torch_compiling():
    """Whether `torch.compile` is tracing the code running now (False on
    the other backends)."""
    if keras.config.backend() != "torch":
        return False
    import torch

    return torch.compiler.is_compiling()


def first_invalid_label(labels, num_labels, checked):
    """The first of numpy `labels` at the positions `checked` (a boolean
    array of their shape) that is not an integer id in `[0, num_labels)`:
    `(position, label, count)` with the position as a tuple of ints, the
    label as an int (a float when fractional) and how many such labels
    there are; None when every checked label is an id."""
    bad = checked & ((labels < 0) | (labels >= num_labels) | (labels != np.floor(labels)))
    if not bad.any():
        return None
    position = tuple(int(i) for i in np.argwhere(bad)[0])
    label = labels[position]
    label = int(label) if label == np.floor(label) else float(label)
    return position, label, int(bad.sum())


def static_dimension(dim):
    """`dim` as an `int` when it is a concrete integer, else None: `None`
    itself, a JAX symbolic dimension (under `jax2tf` export), a size traced
    by torch's exporters."""
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
        return int(dim)
    return None
