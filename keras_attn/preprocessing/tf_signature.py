"""The `tf.data` signature Keras gives a `DataGenerator` on TensorFlow, with
a free batch length.

Keras infers a `PyDataset`'s signature from its first two batches
(`PyDatasetAdapter.get_tf_dataset`), so batches padded to their own longest
could fix one length and a later batch of another stops the epoch. While it
infers the signature of a `DataGenerator` padding to each batch's longest
(directly or wrapped), this makes axis 1 of every tensor of rank >= 2 None;
other datasets are unchanged. Uses `PyDatasetAdapter.get_tf_dataset` and
`_output_signature`, checked against Keras 3.15.1 (`CHECKED_KERAS_VERSION`;
tests/preprocessing/test_data_generator.py checks the installed Keras).
"""

import threading

CHECKED_KERAS_VERSION = "3.15.1"

# While Keras infers a signature in this thread: whether a DataGenerator
# padding to each batch's longest gave one of the batches it read.
_inferring = threading.local()


def note_batch_with_free_length():
    """Called by a `DataGenerator` padding to each batch's longest for each batch
    it gives: a signature being inferred gets a free length."""
    if getattr(_inferring, "active", False):
        _inferring.free_length = True


def install():
    """Wraps `PyDatasetAdapter.get_tf_dataset`, once per process."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    original = PyDatasetAdapter.get_tf_dataset
    if getattr(original, "frees_data_generator_lengths", False):
        return

    def get_tf_dataset(adapter):
        if adapter._output_signature is not None:
            return original(adapter)
        _inferring.active, _inferring.free_length = True, False
        try:
            dataset = original(adapter)  # infers `_output_signature` from batches
            free_length = _inferring.free_length
        finally:
            _inferring.active = False
        if not free_length:
            return dataset
        adapter._output_signature = with_free_length(adapter._output_signature)
        return original(adapter)

    get_tf_dataset.frees_data_generator_lengths = True
    PyDatasetAdapter.get_tf_dataset = get_tf_dataset


def with_free_length(signature):
    """`signature` with axis 1 of every `tf.TensorSpec` of rank >= 2 None."""
    import tensorflow as tf

    def free(spec):
        if not isinstance(spec, tf.TensorSpec) or spec.shape.rank is None or spec.shape.rank < 2:
            return spec
        shape = spec.shape.as_list()
        shape[1] = None
        return tf.TensorSpec(shape, spec.dtype, spec.name)

    return tf.nest.map_structure(free, signature)
