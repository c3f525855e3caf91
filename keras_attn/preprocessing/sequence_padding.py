"""Padding a list of arrays along one or several leading dimensions."""

import numpy as np

from keras_attn.preprocessing.arguments import check_count


def sequence_padding(inputs, length=None, value=0, seq_dims=1, mode="post"):
    """Stacks arrays of different sizes into one, padding (and cutting) their
    first `seq_dims` dimensions, as bert4keras's `sequence_padding`.

    The result has shape `(len(inputs), *length, *rest)`, `rest` the inputs'
    common other dimensions, in numpy's common dtype of the non-empty inputs.
    Entries keep their indices (`"post"`) or end at `length` (`"pre"`); every
    other entry is `value`. A longer input keeps its first `length` entries in
    both modes.

    Args:
        inputs: a non-empty sequence of array-likes of the same rank.
        length: `None` (each dimension's maximum), an int, or `seq_dims` ints.
        value: the padding value.
        seq_dims: how many leading dimensions to pad.
        mode: `"post"` (pad at the end) or `"pre"`.

    Returns a numpy array; ValueError for inputs or arguments that do not fit.

    Example:

    >>> sequence_padding([[1, 2, 3], [4]])
    array([[1, 2, 3],
           [4, 0, 0]])
    """
    if mode not in ("post", "pre"):
        raise ValueError(f'sequence_padding: `mode` must be "post" or "pre"; received {mode!r}.')
    arrays = [np.asarray(x) for x in inputs]
    if not arrays:
        raise ValueError("sequence_padding: `inputs` is empty; there is nothing to pad.")
    check_count("sequence_padding", "seq_dims", seq_dims)
    for index, array in enumerate(arrays):
        if array.ndim < seq_dims or array.shape[seq_dims:] != arrays[0].shape[seq_dims:]:
            raise ValueError(
                f"sequence_padding: input {index} has shape {array.shape}; with "
                f"seq_dims={seq_dims} every input needs {seq_dims} padded dimension(s) "
                f"followed by the shape of input 0's other dimensions, "
                f"{arrays[0].shape[seq_dims:]}."
            )
    if length is None:
        length = np.max([array.shape[:seq_dims] for array in arrays], axis=0)
    elif np.ndim(length) == 0:
        length = [length] * seq_dims
    if len(length) != seq_dims:
        raise ValueError(
            f"sequence_padding: `length` must be None or give {seq_dims} size(s), one per "
            f"padded dimension (seq_dims={seq_dims}); received {length!r}."
        )
    length = [int(size) for size in length]
    # An empty list becomes a float64 array; it should not decide the dtype.
    filled = [array for array in arrays if array.size] or arrays[:1]
    dtype = np.result_type(*filled)
    outputs = np.full((len(arrays), *length, *arrays[0].shape[seq_dims:]), value, dtype=dtype)
    for row, array in enumerate(arrays):
        array = array[tuple(slice(0, size) for size in length)]
        if mode == "post":
            place = tuple(slice(0, size) for size in array.shape[:seq_dims])
        else:
            place = tuple(
                slice(total - size, total) for total, size in zip(length, array.shape[:seq_dims])
            )
        outputs[(row, *place)] = array
    return outputs
