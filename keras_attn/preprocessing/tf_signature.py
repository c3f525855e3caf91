"""The `tf.data` signature Keras gives a `DataGenerator` on TensorFlow: its
batch length free, as the generator pads each batch to its own longest.

On TensorFlow, Keras' `fit`, `evaluate` and `predict` read a
`keras.utils.PyDataset` through `tf.data.Dataset.from_generator`, whose
signature (`PyDatasetAdapter.get_tf_dataset`) keeps every dimension the
first two batches share. Batches padded to their own longest, whose first
two happen to have one length, then fix that length, and a later batch of
another length stops the epoch with tf.data's "`generator` yielded an
element of shape (2, 7) where an element of shape (None, 5) was expected".
Keras has no public way to give a `PyDataset` its signature, so this module
wraps that one method: when a `DataGenerator` padding to each batch's
longest is read while Keras infers the signature (directly, or through a
`PyDataset` that wraps it, such as `TransformerModel.fit`'s checks), axis 1
of every tensor of rank 2 or more becomes None, as tf.keras 2 left every
dimension of a generator's batches (bert4keras's `forfit()`). Other
datasets get Keras' signature unchanged.

The training step is then traced once for every length; with
`jit_compile=True` XLA still compiles once per length it meets, as on JAX.

Uses `PyDatasetAdapter.get_tf_dataset` and its `_output_signature`,
checked against Keras 3.15.1 (`CHECKED_KERAS_VERSION`);
`tests/preprocessing/test_data_generator.py` checks both on the installed
Keras.
"""

import threading

CHECKED_KERAS_VERSION = "3.15.1"

# While Keras infers a signature in this thread: whether a DataGenerator
# padding to each batch's longest gave one of the batches it read.
_inferring = threading.local()


def note_batch_with_free_length():
    """Called by a `DataGenerator` padding to each batch's longest for each
    batch it gives: while Keras infers a `tf.data` signature from it, that
    signature gets a free batch length (see the module's docstring)."""
    if getattr(_inferring, "active", False):
        _inferring.free_length = True


def install():
    """Wraps `PyDatasetAdapter.get_tf_dataset` (once per process) so that
    the signatures of `DataGenerator` batches have a free length."""
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
    """`signature` (a nest of `tf.TensorSpec` and others) with axis 1 of
    every `tf.TensorSpec` of rank 2 or more None."""
    import tensorflow as tf

    def free(spec):
        if not isinstance(spec, tf.TensorSpec) or spec.shape.rank is None or spec.shape.rank < 2:
            return spec
        shape = spec.shape.as_list()
        shape[1] = None
        return tf.TensorSpec(shape, spec.dtype, spec.name)

    return tf.nest.map_structure(free, signature)
