"""`keras_attn.preprocessing.DataGenerator`: batches, padding and per-epoch
shuffling against hand-written batches, and one epoch of `fit` from it on
the backend under test (CI runs each), including the TensorFlow trap it
avoids: a `PyDataset` batch holding Python lists."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.preprocessing import DataGenerator
from tests.harness import BACKEND

# (token ids, label); the label doubles as the example's identity.
EXAMPLES = [([2, 5, 3], 0), ([2, 3], 1), ([2, 6, 7, 3], 2), ([2, 9, 3], 3), ([2, 3], 4)]


def encode(example):
    token_ids, label = example
    return (token_ids, [0] * len(token_ids)), label


def test_batches_in_order_are_padded_per_batch():
    generator = DataGenerator(EXAMPLES, encode, batch_size=2, shuffle=False)
    assert len(generator) == 3
    (token_ids, segment_ids), labels = generator[0]
    np.testing.assert_array_equal(token_ids, [[2, 5, 3], [2, 3, 0]])
    np.testing.assert_array_equal(segment_ids, [[0, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(labels, [0, 1])
    (token_ids, _), labels = generator[1]
    np.testing.assert_array_equal(token_ids, [[2, 6, 7, 3], [2, 9, 3, 0]])
    (token_ids, _), labels = generator[2]  # the short last batch
    np.testing.assert_array_equal(token_ids, [[2, 3]])
    np.testing.assert_array_equal(labels, [4])
    with pytest.raises(IndexError):
        generator[3]


def test_fixed_length_pads_and_cuts_and_dicts_keep_their_keys():
    def by_name(example):
        token_ids, label = example
        return {"token_ids": token_ids, "segment_ids": [1] * len(token_ids)}, [label]

    generator = DataGenerator(
        EXAMPLES, by_name, batch_size=3, shuffle=False, length=3, pad_value=-1
    )
    inputs, labels = generator[0]
    np.testing.assert_array_equal(inputs["token_ids"], [[2, 5, 3], [2, 3, -1], [2, 6, 7]])
    np.testing.assert_array_equal(inputs["segment_ids"], [[1, 1, 1], [1, 1, -1], [1, 1, 1]])
    # A list of one label is a sequence of length 1, padded to 3.
    np.testing.assert_array_equal(labels, [[0, -1, -1], [1, -1, -1], [2, -1, -1]])


def test_shuffling_is_a_new_permutation_every_epoch():
    generator = DataGenerator(EXAMPLES, encode, batch_size=2, seed=0)

    def epoch_order():
        return [int(label) for index in range(len(generator)) for label in generator[index][1]]

    orders = []
    for _ in range(4):
        orders.append(epoch_order())
        generator.on_epoch_end()
    for order in orders:
        assert sorted(order) == [0, 1, 2, 3, 4]
    assert len({tuple(order) for order in orders}) > 1
    # Each batch holds the token ids of the labels it holds.
    (token_ids, _), labels = generator[0]
    for row, label in zip(token_ids, labels):
        expected = EXAMPLES[label][0]
        np.testing.assert_array_equal(row[: len(expected)], expected)
        assert not row[len(expected):].any()


def test_collate_override_and_list_batches_become_tuples():
    class Generator(DataGenerator):
        def collate(self, examples):
            token_ids = keras_attn.sequence_padding([ids for ids, _ in examples])
            labels = np.array([[label] for _, label in examples])
            return [[token_ids, np.zeros_like(token_ids)], labels]

    batch = Generator(EXAMPLES, batch_size=2, shuffle=False)[0]
    assert isinstance(batch, tuple) and isinstance(batch[0], tuple)
    np.testing.assert_array_equal(batch[0][0], [[2, 5, 3], [2, 3, 0]])
    np.testing.assert_array_equal(batch[1], [[0], [1]])


def test_bert4keras_positional_batch_size():
    """Issue 34, item 15: bert4keras's `DataGenerator(data, batch_size)`
    puts the number where `encode` is; with `collate` overridden its
    batches were silently 32 examples. The number is the batch size."""

    class Generator(DataGenerator):  # a bert4keras `__iter__` body
        def collate(self, examples):
            return np.array([label for _, label in examples])

    examples = [([2, 3], label) for label in range(40)]
    generator = Generator(examples, 16, shuffle=False)
    assert (len(generator), generator.batch_size) == (3, 16)
    np.testing.assert_array_equal(generator[0], np.arange(16))
    np.testing.assert_array_equal(generator[2], np.arange(32, 40))
    # Without `collate`, the examples are their fields (`encode=None`).
    (token_ids, _), labels = DataGenerator(
        [encode(example) for example in EXAMPLES], 2, shuffle=False
    )[0]
    np.testing.assert_array_equal(token_ids, [[2, 5, 3], [2, 3, 0]])
    np.testing.assert_array_equal(labels, [0, 1])
    # bert4keras's third argument is its buffer_size, which has no
    # counterpart: refused with the keyword call to write.
    with pytest.raises(ValueError, match=r"buffer_size.*DataGenerator\(data, batch_size=16\)"):
        Generator(examples, 16, 1000)
    with pytest.raises(TypeError, match="`encode` must be a function.*received str"):
        DataGenerator(EXAMPLES, "encode")


def test_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="example 1 of the batch gives a dict"):
        DataGenerator([((1,), 0), ({"a": 1}, 0)], batch_size=2, shuffle=False)[0]
    with pytest.raises(ValueError, match="batch_size"):
        DataGenerator(EXAMPLES, encode, batch_size=0)
    with pytest.raises(TypeError, match="sequence"):
        DataGenerator(iter(EXAMPLES), encode)


# One epoch of fit on this backend ---------------------------------------------

VOCAB = 12
TINY = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=8,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


@pytest.fixture(scope="module")
def classifier():
    keras.utils.set_random_seed(0)
    encoder = keras_attn.build_transformer_model(TINY)
    probabilities = keras.layers.Dense(5, activation="softmax")(encoder.output[:, 0])
    model = encoder.with_outputs(probabilities)
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


def test_fit_one_epoch_from_the_generator(classifier):
    # One batch shape: a jit-compiled step compiles once.
    generator = DataGenerator(EXAMPLES, encode, batch_size=5, seed=0, length=4)
    history = classifier.fit(generator, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert classifier.predict(generator, verbose=0).shape == (5, 5)


class ListBatches(keras.utils.PyDataset):
    """bert4keras's usual batch: `[token_ids, segment_ids], [labels]`."""

    def __len__(self):
        return 1

    def __getitem__(self, index):
        token_ids = np.array([[2, 5, 3], [2, 3, 0]])
        return [token_ids, np.zeros_like(token_ids)], [np.array([0, 1])]


def two_input_model():
    token_ids = keras.Input((None,), dtype="int32")
    segment_ids = keras.Input((None,), dtype="int32")
    summed = keras.layers.Embedding(VOCAB, 4)(token_ids) + keras.layers.Embedding(2, 4)(segment_ids)
    outputs = keras.layers.Dense(5, activation="softmax")(keras.ops.mean(summed, axis=1))
    model = keras.Model([token_ids, segment_ids], outputs)
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the trap is TensorFlow's tf.data")
def test_lists_in_a_pydataset_batch_fail_on_tensorflow():
    """Keras' own behaviour, which DataGenerator exists to avoid: if this
    starts passing, docs/bert4keras.md's note on lists can go."""
    with pytest.raises(TypeError, match="output_signature"):
        two_input_model().fit(ListBatches(), epochs=1, verbose=0)


def test_the_same_batches_from_the_generator_train_a_two_input_model():
    def encode_list(example):
        token_ids, label = example
        return [token_ids, [0] * len(token_ids)], label  # a list: one field

    # A list from `encode` is one field; tuples are the structure.
    # In order, the first batch holds lengths 3 and 2, which cannot stack.
    with pytest.raises(ValueError, match="sequence_padding"):
        DataGenerator(EXAMPLES, encode_list, batch_size=2, shuffle=False)[0]
    generator = DataGenerator(EXAMPLES, encode, batch_size=5, length=4)
    history = two_input_model().fit(generator, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_transformer_model_takes_lists_in_pydataset_batches(classifier):
    """`TransformerModel.fit` turns the lists of a batch's inputs and
    targets into what `tf.data` takes."""
    history = classifier.fit(ListBatches(), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


# Batches whose length changes after the first two ------------------------------

# In order, batches of lengths 3, 3 and 5: Keras infers the tf.data
# signature on TensorFlow from the first two.
LATER_LONGER = [([2, 5, 3], 0), ([2, 3], 1), ([2, 6, 3], 2), ([2, 9, 3], 3), ([2, 4, 7, 8, 3], 4)]


class BatchCount(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


@pytest.mark.parametrize(
    "model",
    [
        "plain keras",
        # Its fit reads batches through a PyDataset of its own, which only
        # TensorFlow's signature sees (JAX compiles a step per length).
        pytest.param("TransformerModel", marks=pytest.mark.skipif(
            BACKEND != "tensorflow", reason="the tf.data signature is TensorFlow's"
        )),
    ],
)
def test_fit_runs_through_batches_whose_length_changes_after_two(model, classifier):
    generator = DataGenerator(LATER_LONGER, encode, batch_size=2, shuffle=False)
    assert [generator[i][0][0].shape[1] for i in range(3)] == [3, 3, 5]
    count = BatchCount()
    model = two_input_model() if model == "plain keras" else classifier
    history = model.fit(generator, epochs=1, verbose=0, shuffle=False, callbacks=[count])
    assert count.batches == 3
    assert np.isfinite(history.history["loss"][0])


def test_the_keras_internals_of_the_tensorflow_signature_exist():
    """`keras_attn.preprocessing.tf_signature` wraps these (checked against
    the Keras in `CHECKED_KERAS_VERSION`): a Keras upgrade that renames them
    fails here."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    adapter = PyDatasetAdapter(DataGenerator(LATER_LONGER, encode, batch_size=2, shuffle=False))
    assert adapter._output_signature is None
    if BACKEND == "tensorflow":
        (token_ids, _), labels = adapter.get_tf_dataset().element_spec
        assert token_ids.shape.as_list() == [None, None]  # not [None, 3]
        assert labels.shape.as_list() == [None]
