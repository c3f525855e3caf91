"""`DataGenerator`: a `keras.utils.PyDataset` that batches, shuffles and pads
examples, as bert4keras's `DataGenerator`."""

import numbers

import keras
import numpy as np

from keras_attn.preprocessing import tf_signature
from keras_attn.preprocessing.arguments import check_count
from keras_attn.preprocessing.sequence_padding import sequence_padding


class DataGenerator(keras.utils.PyDataset):
    """Batches of padded examples for `fit`, `evaluate` and `predict`.

    Batch `i` encodes examples `i * batch_size` to `(i + 1) * batch_size` of
    this epoch's order with `encode(example)` and stacks them field by field:
    numbers become `(batch,)`, sequences are padded with
    `keras_attn.sequence_padding` to `(batch, length, ...)`. Tuples and dicts
    in what `encode` returns are structure (lists become tuples, as
    TensorFlow's `tf.data` needs); on TensorFlow the length stays free
    (`tf_signature`). Override `collate(examples)` for work on the whole batch.
    bert4keras's positional `DataGenerator(data, 64)` is read as
    `batch_size=64` (a third, `buffer_size`, is a ValueError).

    Args:
        data: the examples, a non-empty sequence (TypeError, ValueError).
        encode: a function from one example to its fields, or None.
        batch_size: examples per batch, an int >= 1.
        shuffle: a new random order every epoch.
        seed: the shuffling's seed (None: fresh entropy).
        length: None (each batch padded to its longest) or the one length to
            pad and cut to.
        pad_value: the padding value.
        **kwargs: `keras.utils.PyDataset`'s `workers`, `use_multiprocessing`,
            `max_queue_size`.

    Example:

    ```python
    def encode(example):
        text, label = example
        return tokenizer.encode(text, maxlen=64), label

    model.fit(keras_attn.preprocessing.DataGenerator(examples, encode, batch_size=32))
    ```
    """

    def __init__(self, data, encode=None, batch_size=32, shuffle=True, seed=None,
                 length=None, pad_value=0, **kwargs):
        super().__init__(**kwargs)
        if not hasattr(data, "__len__") or not hasattr(data, "__getitem__"):
            raise TypeError(
                "DataGenerator: `data` must be a sequence (with len() and indexing), "
                f"e.g. a list; received {type(data).__name__}. Use list(data) for an iterator."
            )
        encode, batch_size = _bert4keras_positional_batch_size(encode, batch_size)
        if encode is not None and not callable(encode):
            raise TypeError(
                "DataGenerator: `encode` must be a function from one example to its fields, "
                f"or None; received {type(encode).__name__}: {encode!r}."
            )
        check_count("DataGenerator", "batch_size", batch_size)
        self.data = data
        self.encode = encode
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.length = length
        self.pad_value = pad_value
        _check_examples_and_length(data, length)
        self._random = np.random.default_rng(seed)
        self._order = self._new_order()
        if length is None and keras.config.backend() == "tensorflow":
            tf_signature.install()

    def __len__(self):
        return -(-len(self.data) // self.batch_size)

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"DataGenerator: batch {index} of {len(self)}.")
        positions = self._order[index * self.batch_size:(index + 1) * self.batch_size]
        if self.length is None:
            tf_signature.note_batch_with_free_length()
        return _with_tuples(self.collate([self.data[position] for position in positions]))

    def on_epoch_end(self):
        self._order = self._new_order()

    def collate(self, examples):
        """The batch of raw `examples`: each encoded, then stacked and padded."""
        encoded = [example if self.encode is None else self.encode(example) for example in examples]
        return self._stack(encoded, "batch")

    def _new_order(self):
        if self.shuffle:
            return self._random.permutation(len(self.data))
        return np.arange(len(self.data))

    def _stack(self, fields, where):
        first = fields[0]
        if isinstance(first, (tuple, dict)):
            for index, field in enumerate(fields):
                same = (
                    type(field) is type(first) and len(field) == len(first)
                    and (not isinstance(first, dict) or field.keys() == first.keys())
                )
                if not same:
                    raise ValueError(
                        f"DataGenerator: at {where}, example {index} of the batch gives "
                        f"{_describe(field)} where example 0 gives {_describe(first)}; "
                        "every example must give the same structure."
                    )
            if isinstance(first, dict):
                return {
                    key: self._stack([field[key] for field in fields], f"{where}[{key!r}]")
                    for key in first
                }
            return tuple(
                self._stack([field[position] for field in fields], f"{where}[{position}]")
                for position in range(len(first))
            )
        arrays = [np.asarray(field) for field in fields]
        if all(array.ndim == 0 for array in arrays):
            return np.stack(arrays)
        return sequence_padding(arrays, length=self.length, value=self.pad_value)


def _bert4keras_positional_batch_size(encode, batch_size):
    """`(encode, batch_size)`, an integer `encode` read as bert4keras's
    positional `batch_size`."""
    if not isinstance(encode, numbers.Integral) or isinstance(encode, bool):
        return encode, batch_size
    if batch_size != 32:
        raise ValueError(
            f"DataGenerator: received the number {encode!r} as `encode` and "
            f"batch_size={batch_size!r}; bert4keras's DataGenerator(data, batch_size, "
            "buffer_size) has no buffer_size here (the whole sequence is reshuffled every "
            f"epoch). Write DataGenerator(data, batch_size={encode!r}) (and `encode=` for "
            "a function encoding one example)."
        )
    return None, int(encode)


def _describe(field):
    if isinstance(field, dict):
        return f"a dict with keys {sorted(field)}"
    if isinstance(field, tuple):
        return f"a tuple of {len(field)}"
    return f"a {type(field).__name__}"


def _with_tuples(batch):
    """`batch` with every list a tuple."""
    if isinstance(batch, (list, tuple)):
        return tuple(_with_tuples(item) for item in batch)
    if isinstance(batch, dict):
        return {key: _with_tuples(value) for key, value in batch.items()}
    return batch


def _check_examples_and_length(data, length):
    """ValueError for empty `data` or a `length` not None or an int >= 1."""
    if len(data) == 0:
        raise ValueError(
            "DataGenerator: `data` holds no examples (len 0), so there is no batch for "
            "fit, evaluate or predict; give at least one example."
        )
    if length is not None and (
        not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 1
    ):
        raise ValueError(
            "DataGenerator: `length` must be None (each batch padded to its longest "
            f"example) or an int >= 1 (every sequence padded or cut to it); received {length!r}."
        )
