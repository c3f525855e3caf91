"""The input contract of builder models: inputs by name, dtypes, ranges and
lengths checked before any compiled step, and weights kept when a loop
raises."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.models.input_contract import InputError
from tests.harness import BACKEND
from tests.harness import supports_jit
from tests.harness import to_numpy

VOCAB, MAX_LENGTH = 30, 10
SMALL = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=MAX_LENGTH,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def build(variant="bert", config=None, **arguments):
    keras.utils.set_random_seed(0)
    return keras_attn.build_transformer_model(
        dict(SMALL, **(config or {})), variant=variant, **arguments
    )


@pytest.fixture(scope="module")
def bert():
    return build()


@pytest.fixture(scope="module")
def roberta():
    return build(
        "roberta",
        dict(type_vocab_size=1, pad_token_id=1, max_position_embeddings=MAX_LENGTH + 2),
    )


@pytest.fixture(scope="module")
def tta():
    return build("tta", dict(mask_token_id=3), application="mlm")


def ids(batch=2, length=5, seed=0, low=1, high=VOCAB):
    return np.random.default_rng(seed).integers(low, high, size=(batch, length)).astype("int32")


def bert_inputs(**changes):
    token_ids = ids()
    inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}
    inputs.update(changes)
    return inputs


def outputs(model, inputs):
    return to_numpy(model(inputs))


# Names -------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["attention_mask", "input_ids", "padding_mask", "token_type_ids", "typo"])
def test_unknown_keys_are_errors_naming_them(bert, key):
    inputs = bert_inputs(**{key: np.ones((2, 5), "int32")})
    for entry in (bert, bert.predict, bert.predict_on_batch):
        with pytest.raises(InputError, match=key) as raised:
            entry(inputs)
        assert "token_ids" in str(raised.value) and "segment_ids" in str(raised.value)


def test_missing_key_is_an_error(bert):
    with pytest.raises(InputError, match="segment_ids"):
        bert({"token_ids": ids()})


def test_inputs_are_taken_by_name_not_by_position(bert):
    inputs = bert_inputs(segment_ids=(ids() % 2))
    reordered = {"segment_ids": inputs["segment_ids"], "token_ids": inputs["token_ids"]}
    np.testing.assert_array_equal(outputs(bert, inputs), outputs(bert, reordered))
    # The segments matter, so a re-mapping could not go unnoticed.
    assert np.abs(outputs(bert, inputs) - outputs(bert, bert_inputs())).max() > 1e-3


@pytest.mark.parametrize("name", ["roberta", "tta"])
def test_zero_segment_ids_are_ignored_by_models_without_token_types(name, request):
    model = request.getfixturevalue(name)
    token_ids = ids(low=4)
    alone = outputs(model, {"token_ids": token_ids})
    paired = outputs(model, {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)})
    np.testing.assert_array_equal(alone, paired)
    np.testing.assert_allclose(
        alone,
        model.predict({"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}, verbose=0),
        atol=1e-6,
    )
    ones = np.ones_like(token_ids)
    for entry in (model, model.predict):
        with pytest.raises(InputError, match="segment_ids.*not all zero"):
            entry({"token_ids": token_ids, "segment_ids": ones})


# Values ------------------------------------------------------------------------

BAD_VALUES = {
    "negative token id": (dict(token_ids=np.array([[2, -1, 3]])), "-1", "vocab_size=30"),
    "token id == vocab_size": (dict(token_ids=np.array([[2, 30, 3]])), "30", "vocab_size=30"),
    "segment id out of range": (dict(segment_ids=np.array([[0, 1, 2]])), "2", "type_vocab_size=2"),
    "negative segment id": (dict(segment_ids=np.array([[0, -1, 0]])), "-1", "type_vocab_size=2"),
    "fractional id": (dict(token_ids=np.array([[2.0, 3.5, 4.0]])), "3.5", "integers"),
    "too long": (dict(token_ids=np.ones((1, 11), "int32"), segment_ids=np.zeros((1, 11), "int32")), "11", "10 positions"),
    "empty length": (dict(token_ids=np.zeros((1, 0), "int32"), segment_ids=np.zeros((1, 0), "int32")), "empty", "(1, 0)"),
    "string ids": (dict(token_ids=np.array([["a", "b", "c"]])), "token_ids", "integers"),
}


def bad_inputs(changes):
    inputs = {"token_ids": np.array([[2, 3, 4]], "int32"), "segment_ids": np.zeros((1, 3), "int32")}
    inputs.update(changes)
    return inputs


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_are_errors_naming_value_and_limit(bert, case):
    changes, value, limit = BAD_VALUES[case]
    inputs = bad_inputs(changes)
    entries = [bert, bert.predict, bert.predict_on_batch]
    for entry in entries:
        with pytest.raises(InputError) as raised:
            entry(inputs)
        assert value in str(raised.value) and limit in str(raised.value)


def test_fit_and_evaluate_check_before_the_first_step(bert):
    model = build()
    model.compile(optimizer="sgd", loss="mse")
    before = [to_numpy(v) for v in model.weights]
    inputs = bad_inputs(dict(token_ids=np.array([[2, 99, 3]])))
    target = np.zeros((1, 3, 16), "float32")
    for entry in (model.fit, model.evaluate, model.train_on_batch, model.test_on_batch):
        with pytest.raises(InputError, match="99"):
            entry(inputs, target, **({"verbose": 0} if entry.__name__ in ("fit", "evaluate") else {}))
    for old, variable in zip(before, model.weights):
        np.testing.assert_array_equal(old, to_numpy(variable))


@pytest.mark.skipif(not supports_jit(), reason="XLA-compiled predict on TensorFlow and JAX")
def test_compiled_predict_after_several_lengths_still_checks():
    """XLA's gather clamps out-of-range rows; the check must happen before."""
    model = build()
    model.compile(jit_compile=True)
    for length in (3, 4, 5):
        model.predict(bad_inputs(dict(token_ids=ids(1, length), segment_ids=np.zeros((1, length), "int32"))), verbose=0)
    for changes, message in [
        (dict(token_ids=np.ones((1, 11), "int32"), segment_ids=np.zeros((1, 11), "int32")), "11"),
        (dict(token_ids=np.array([[2, 31, 3]])), "31"),
    ]:
        with pytest.raises(InputError, match=message):
            model.predict(bad_inputs(changes), verbose=0)


def test_integral_float_ids_equal_integer_ids(bert):
    inputs = bert_inputs()
    as_float = {name: value.astype("float32") for name, value in inputs.items()}
    np.testing.assert_array_equal(outputs(bert, inputs), outputs(bert, as_float))


def test_tta_mask_token_id_must_be_a_vocabulary_id():
    with pytest.raises(ValueError, match="mask_token_id=30.*vocab_size=30"):
        build("tta", dict(mask_token_id=30), application="mlm")
    with pytest.raises(ValueError, match="mask_token_id=30.*vocab_size=30"):
        keras_attn.TTAEncoder(
            vocab_size=30, hidden_size=8, num_layers=1, num_heads=2,
            intermediate_size=8, mask_token_id=30,
        )


def test_padding_mask_values_are_checked():
    model = build(padding_mask_input=True)
    inputs = bert_inputs(padding_mask=np.array([[1, 1, 2, 0, 0], [1, 1, 1, 1, 1]]))
    with pytest.raises(InputError, match="padding_mask.*2"):
        model(inputs)
    inputs["padding_mask"] = inputs["padding_mask"] == 1
    model(inputs)  # booleans are a padding mask's natural dtype


# Datasets and generators --------------------------------------------------------


def test_dataset_and_generator_batches_are_checked(bert):
    tf = pytest.importorskip("tensorflow")
    good, bad = bert_inputs(), bad_inputs(dict(token_ids=np.array([[2, 45, 3]])))
    dataset = tf.data.Dataset.from_tensor_slices(bad).batch(1)
    with pytest.raises(Exception, match="vocab_size=30"):
        bert.predict(dataset, verbose=0)
    with pytest.raises(InputError, match="45"):
        bert.predict((batch for batch in [good, bad]), verbose=0)

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, index):
            return [good, bad][index]

    with pytest.raises(InputError, match="45"):
        bert.predict(Batches(), verbose=0)
    np.testing.assert_allclose(
        bert.predict(tf.data.Dataset.from_tensor_slices(good).batch(2), verbose=0),
        outputs(bert, good),
        atol=1e-6,
    )


def test_batches_of_different_lengths(roberta):
    """TensorFlow concatenates them into a RaggedTensor; on JAX and torch the
    error says how to pad them to one length (the README's pattern)."""
    tf = pytest.importorskip("tensorflow")
    rows = [[5, 6, 7], [8, 9], [10, 11, 12, 13, 14], [15]]

    def dataset(**padded):
        return tf.data.Dataset.from_generator(
            lambda: iter(rows), output_signature=tf.TensorSpec([None], tf.int32)
        ).map(lambda row: {"token_ids": row}).padded_batch(2, padding_values=1, **padded)

    fixed = roberta.predict(dataset(padded_shapes={"token_ids": [6]}), verbose=0)
    for start in (0, 2):
        batch = np.full((2, 6), 1, "int32")
        for row, tokens in enumerate(rows[start:start + 2]):
            batch[row, : len(tokens)] = tokens
        np.testing.assert_allclose(fixed[start:start + 2], outputs(roberta, {"token_ids": batch}), atol=1e-5)
    if BACKEND == "tensorflow":
        ragged = roberta.predict(dataset(), verbose=0)
        assert isinstance(ragged, tf.RaggedTensor) and ragged.shape[0] == 4
    else:
        with pytest.raises(InputError, match="padded_shapes"):
            roberta.predict(dataset(), verbose=0)


# The same rules eagerly and in a tf.data pipeline ----------------------------------


def build_conditional():
    """A model without token types (`segment_ids` droppable) and with a
    `condition` of width 3: every value rule applies to one of its inputs."""
    return build(
        "roberta",
        dict(type_vocab_size=1, pad_token_id=1, max_position_embeddings=MAX_LENGTH + 2),
        conditional_layer_norm=3,
    )


@pytest.fixture(scope="module")
def conditional():
    return build_conditional()


def conditional_inputs(**changes):
    inputs = {
        "token_ids": np.array([[5, 6, 7]], "int32"),
        "segment_ids": np.zeros((1, 3), "int32"),
        "condition": np.array([[0.5, -1.0, 2.0]], "float32"),
    }
    inputs.update({name: np.asarray(value) for name, value in changes.items()})
    return inputs


def pipeline_text(error):
    """An error from a `tf.data` pipeline as its assertion wrote it:
    TensorFlow's `Assert` escapes the quotes of the messages it prints."""
    return str(error).replace("\\'", "'")


def test_dataset_with_a_non_finite_condition_is_refused(conditional):
    tf = pytest.importorskip("tensorflow")
    inputs = conditional_inputs(condition=[[0.5, np.nan, 2.0]])
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        conditional.predict(tf.data.Dataset.from_tensor_slices(inputs).batch(1), verbose=0)
    assert "Input 'condition' holds a non-finite value (nan at (0, 1))" in pipeline_text(raised.value)

    model = build_conditional()
    model.compile(optimizer="sgd", loss="mse")
    before = [to_numpy(v) for v in model.weights]
    inputs = conditional_inputs(condition=[[0.5, -1.0, np.inf]])
    dataset = tf.data.Dataset.from_tensor_slices((inputs, np.zeros((1, 3, 16), "float32"))).batch(1)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        model.fit(dataset, verbose=0)
    assert "Input 'condition' holds a non-finite value (inf at (0, 2))" in pipeline_text(raised.value)
    for old, variable in zip(before, model.weights):
        np.testing.assert_array_equal(old, to_numpy(variable))


AGREEMENT_CASES = {
    "valid, integral float ids": dict(token_ids=np.array([[5.0, 6.0, 7.0]], "float32")),
    "negative id": dict(token_ids=[[5, -1, 7]]),
    "id == vocab_size": dict(token_ids=[[5, 6, 30]]),
    "non-integer float id": dict(token_ids=np.array([[5.0, 6.25, 7.0]], "float32")),
    "infinite float id": dict(token_ids=np.array([[5.0, 6.0, -np.inf]], "float32")),
    "non-zero droppable segment id": dict(segment_ids=[[0, 0, 1]]),
    "too long": dict(token_ids=np.full((1, 11), 5), segment_ids=np.zeros((1, 11), "int32")),
    "non-finite condition": dict(condition=[[np.nan, 0.0, 0.0]]),
}


@pytest.mark.parametrize("case", list(AGREEMENT_CASES))
def test_eager_and_pipeline_checks_agree(conditional, case):
    """Each rule is stated once (`keras_attn.models.input_rules`); an eager
    call and a `tf.data` pipeline must accept the same inputs and refuse the
    others in the same words. The dataset's shapes are unknown, so that every
    rule, the length's included, is tested inside the pipeline."""
    tf = pytest.importorskip("tensorflow")
    inputs = conditional_inputs(**AGREEMENT_CASES[case])
    try:
        conditional(inputs)
        eager = None
    except InputError as error:
        eager = str(error)
    assert (eager is None) == case.startswith("valid"), eager
    signature = {
        name: tf.TensorSpec((None, 3 if name == "condition" else None), value.dtype)
        for name, value in inputs.items()
    }
    dataset = tf.data.Dataset.from_generator(lambda: iter([inputs]), output_signature=signature)
    if eager is None:
        conditional.predict(dataset, verbose=0)
        return
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        conditional.predict(dataset, verbose=0)
    assert f"assertion failed: [{eager}]" in pipeline_text(raised.value)


# Shapes ------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["bert", "roberta", "sinusoidal", "alibi"])
def test_symbolic_batch_dimension_is_unknown(variant):
    model = build(variant, with_pool=True)
    for output in model.output.values():
        assert output.shape[0] is None
    head = keras.layers.Dense(3)(model.output["pooled_output"])
    classifier = keras.Model(model.input, head)
    token_ids = ids(batch=3, low=2)
    inputs = {name: (token_ids if name == "token_ids" else np.zeros_like(token_ids)) for name in model.input_contract.names}
    assert tuple(to_numpy(classifier(inputs)).shape) == (3, 3)


@pytest.mark.parametrize("with_pool, activation", [(True, np.tanh), ("tanh", np.tanh), ("linear", lambda x: x), ("relu", lambda x: np.maximum(x, 0))])
def test_with_pool_activation(with_pool, activation):
    model = build(with_pool=with_pool)
    inputs = bert_inputs()
    result = model(inputs)
    dense = model.get_layer("Pooler-Dense")
    expected = activation(
        to_numpy(result["sequence_output"])[:, 0] @ to_numpy(dense.kernel) + to_numpy(dense.bias)
    )
    np.testing.assert_allclose(to_numpy(result["pooled_output"]), expected, atol=1e-5)


@pytest.mark.parametrize("with_pool", ["no_such_activation", 3])
def test_with_pool_of_another_kind_is_an_error(with_pool):
    with pytest.raises(ValueError, match="with_pool"):
        build(with_pool=with_pool)


# Weights survive errors ----------------------------------------------------------


class RaiseAt(keras.callbacks.Callback):
    def __init__(self, hook, batch):
        super().__init__()
        setattr(self, hook, self.maybe_raise)
        self.batch = batch

    def maybe_raise(self, batch, logs=None):
        if batch == self.batch:
            raise RuntimeError("stop here")


def test_model_keeps_its_weights_when_predict_raises():
    model = build()
    inputs = {"token_ids": ids(4), "segment_ids": np.zeros((4, 5), "int32")}
    before = [to_numpy(v) for v in model.weights]
    expected = model.predict(inputs, verbose=0)
    with pytest.raises(RuntimeError, match="stop here"):
        model.predict(inputs, batch_size=2, verbose=0, callbacks=[RaiseAt("on_predict_batch_begin", 1)])
    for old, variable in zip(before, model.weights):
        np.testing.assert_array_equal(old, to_numpy(variable))
    np.testing.assert_allclose(model.predict(inputs, verbose=0), expected, atol=1e-6)


def test_fit_that_raises_keeps_the_completed_steps():
    inputs = {"token_ids": ids(4), "segment_ids": np.zeros((4, 5), "int32")}
    target = np.random.default_rng(1).normal(size=(4, 5, 16)).astype("float32")
    model, twin = build(), build()
    for model_ in (model, twin):
        model_.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    with pytest.raises(RuntimeError, match="stop here"):
        model.fit(inputs, target, batch_size=2, shuffle=False, verbose=0,
                  callbacks=[RaiseAt("on_train_batch_end", 0)])
    twin.train_on_batch({name: value[:2] for name, value in inputs.items()}, target[:2])
    changed = False
    for variable, reference, initial in zip(model.weights, twin.weights, build().weights):
        np.testing.assert_allclose(to_numpy(variable), to_numpy(reference), atol=1e-6)
        changed |= bool(np.any(to_numpy(variable) != to_numpy(initial)))
    assert changed
    model.predict(inputs, verbose=0)


# Saving keeps the contract ---------------------------------------------------------


def test_saved_model_keeps_its_contract(bert, tmp_path):
    path = str(tmp_path / "model.keras")
    bert.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(outputs(restored, bert_inputs()), outputs(bert, bert_inputs()), atol=1e-6)
    with pytest.raises(InputError, match="vocab_size=30"):
        restored(bad_inputs(dict(token_ids=np.array([[2, 30, 3]]))))


# Property: random dicts of right and wrong keys, dtypes and ranges ----------------


def test_random_inputs_are_accepted_exactly_when_valid(bert):
    """The rule, written independently here: the keys are exactly token_ids and
    segment_ids; integer dtypes, or floats holding integers; token ids in
    [0, 30), segment ids in [0, 2); one shape, length 1..10. A valid dict must
    give the outputs of its canonical int32 form."""
    rng = np.random.default_rng(7)
    keys = ["token_ids", "segment_ids", "attention_mask", "input_ids"]
    accepted = rejected = 0
    for _ in range(40):
        length = int(rng.choice([3, 5, 11]))
        chosen = [key for key in keys if rng.random() < (0.9 if key in keys[:2] else 0.15)]
        inputs, valid = {}, set(chosen) == {"token_ids", "segment_ids"} and length <= MAX_LENGTH
        for key in chosen:
            limit = 2 if key == "segment_ids" else VOCAB
            values = rng.integers(0, limit, size=(2, length))
            if rng.random() < 0.2:
                values[rng.integers(2), rng.integers(length)] = rng.choice([-1, limit, limit + 5])
                valid = False
            dtype = str(rng.choice(["int32", "int64", "float32", "float32-fraction"]))
            if dtype == "float32-fraction":
                values = values.astype("float32")
                values[0, 0] += 0.25
                valid = False
            else:
                values = values.astype(dtype)
            inputs[key] = values
        if valid:
            canonical = {key: inputs[key].astype("int32") for key in ("token_ids", "segment_ids")}
            np.testing.assert_array_equal(outputs(bert, inputs), outputs(bert, canonical))
            accepted += 1
        else:
            with pytest.raises(InputError):
                bert(inputs)
            rejected += 1
    assert accepted >= 5 and rejected >= 5


def test_a_head_built_with_with_outputs_keeps_the_contract(bert, tmp_path):
    head = keras.layers.Dense(2, name="head")(bert.output[:, 0])
    classifier = bert.with_outputs(head, name="classifier")
    inputs = bert_inputs()
    expected = outputs(bert, inputs)[:, 0] @ to_numpy(classifier.get_layer("head").kernel)
    np.testing.assert_allclose(outputs(classifier, inputs), expected, atol=1e-5)
    classifier.compile(optimizer="sgd", loss="mse")
    classifier.fit(inputs, np.zeros((2, 2), "float32"), verbose=0)
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    for model in (classifier, keras.models.load_model(path)):
        with pytest.raises(InputError, match="attention_mask"):
            model(dict(inputs, attention_mask=np.ones((2, 5), "int32")))
        with pytest.raises(InputError, match="vocab_size=30"):
            model.predict(bad_inputs(dict(token_ids=np.array([[2, 30, 3]]))), verbose=0)


def test_token_labels_are_checked_before_the_first_step():
    """In a compiled step a -100 label could only make the loss, then every
    weight, NaN; the model checks array targets first."""
    model = build("tta", dict(mask_token_id=3), application="mlm")
    model.compile(optimizer="sgd", loss=keras_attn.TokenCrossEntropy(ignore_id=0))
    token_ids = ids(low=4)
    labels = token_ids.copy()
    labels[1, 2] = -100
    before = [to_numpy(v) for v in model.weights]
    for entry in (model.fit, model.train_on_batch, model.evaluate):
        with pytest.raises(ValueError, match=r"label -100 at position \(1, 2\)"):
            entry({"token_ids": token_ids}, labels)
    for old, variable in zip(before, model.weights):
        np.testing.assert_array_equal(old, to_numpy(variable))
    model.fit({"token_ids": token_ids}, token_ids, verbose=0)
    assert all(np.isfinite(to_numpy(v)).all() for v in model.weights)


def test_nested_lists_are_ids_and_lists_are_read_in_bert4keras_order(bert, roberta):
    inputs = bert_inputs(segment_ids=(ids() % 2))
    as_lists = {name: value.tolist() for name, value in inputs.items()}
    np.testing.assert_array_equal(outputs(bert, as_lists), outputs(bert, inputs))
    positional = (inputs["token_ids"], inputs["segment_ids"])
    np.testing.assert_array_equal(outputs(bert, positional), outputs(bert, inputs))
    np.testing.assert_array_equal(outputs(bert, [v.tolist() for v in positional]), outputs(bert, inputs))
    with pytest.raises(InputError, match=r"order \['token_ids', 'segment_ids'\].*list of 3"):
        bert([inputs["token_ids"]] * 3)
    token_ids = ids(low=4)
    np.testing.assert_array_equal(outputs(roberta, [token_ids]), outputs(roberta, {"token_ids": token_ids}))
    np.testing.assert_array_equal(outputs(roberta, token_ids.tolist()), outputs(roberta, token_ids))
