"""The builder's `conditional_layer_norm` hook: every LayerNorm conditioned
on a `condition` input, equal to the plain model until trained."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.models.input_contract import InputError
from tests.harness import supports_jit, to_numpy
from tests.models.test_builder import hf_outputs

TINY = dict(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=20,
    max_position_embeddings=16,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
NORMS = ["Embedding-Norm", "Transformer-0-MultiHeadSelfAttention-Norm",
         "Transformer-0-FeedForward-Norm", "MLM-Norm"]


def predict(model, inputs):
    # One compiled forward pass per model: much cheaper on JAX than eager ops.
    return np.asarray(model.predict_on_batch(inputs))


def batch(vocab=40, seed=0, width=3):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(1, vocab, size=(2, 6)).astype("int32"),
        "segment_ids": rng.integers(0, 2, size=(2, 6)).astype("int32"),
        "condition": rng.normal(size=(2, width)).astype("float32"),
    }


def test_loaded_model_equals_the_plain_model_until_trained_and_saves(hf_bert_dir, tmp_path):
    # With a hidden layer on the condition: its kernel is checkpoint-free too.
    model = keras_attn.build_transformer_model(
        hf_bert_dir,
        application="mlm",
        conditional_layer_norm=3,
        conditional_layer_norm_hidden_size=5,
        conditional_layer_norm_activation="tanh",
    )
    for name in NORMS:
        assert isinstance(
            model.get_layer(name), keras_attn.layers.ConditionalLayerNormalization
        ), name
    inputs = batch(vocab=99)
    other = dict(inputs, condition=-inputs["condition"])
    # The plain model: the checkpoint's own masked-LM logits (no padding here).
    expected = hf_outputs(
        hf_bert_dir, "BertForPreTraining", inputs["token_ids"], inputs["segment_ids"]
    )["mlm_logits"]
    np.testing.assert_allclose(predict(model, inputs), expected, atol=1e-4)
    np.testing.assert_allclose(predict(model, other), expected, atol=1e-4)

    # Condition weights as training would leave them: the condition matters.
    rng = np.random.default_rng(1)
    for name in NORMS:
        for weight in (model.get_layer(name).gamma_kernel, model.get_layer(name).beta_kernel):
            weight.assign(0.3 * rng.normal(size=weight.shape).astype("float32"))
    outputs = predict(model, inputs)
    assert np.abs(outputs - predict(model, other)).max() > 1e-2

    path = str(tmp_path / "conditional.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored.get_layer("MLM-Norm"), keras_attn.layers.ConditionalLayerNormalization)
    np.testing.assert_allclose(predict(restored, inputs), outputs, atol=1e-5)
    with pytest.raises(InputError, match=r"Missing input\(s\) \['condition'\]"):
        restored({k: v for k, v in inputs.items() if k != "condition"})


@pytest.mark.slow  # a compiled fit of a whole model: about 30 s on JAX
def test_fit_trains_the_condition_weights_of_every_norm():
    model = keras_attn.build_transformer_model(
        TINY, application="mlm", conditional_layer_norm=3
    )
    inputs = batch()
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=supports_jit(),
    )
    model.fit(inputs, inputs["token_ids"], epochs=2, batch_size=2, verbose=0)
    for name in NORMS:
        assert np.abs(to_numpy(model.get_layer(name).gamma_kernel)).max() > 0, name
        assert np.abs(to_numpy(model.get_layer(name).beta_kernel)).max() > 0, name
    other = dict(inputs, condition=-inputs["condition"])
    assert np.abs(to_numpy(model(inputs)) - to_numpy(model(other))).max() > 1e-4


@pytest.mark.parametrize(
    "change, message",
    [
        ({"condition": None}, r"Missing input\(s\) \['condition'\]"),
        ({"condition": np.zeros((2, 4), "float32")}, r"'condition' must be \(batch, 3\); received shape \(2, 4\)"),
        ({"condition": np.zeros((3, 3), "float32")}, "'condition' has a batch of 3, the ids a batch of 2"),
        ({"condition": np.full((2, 3), np.nan, "float32")}, "'condition' holds a non-finite value"),
    ],
    ids=["missing", "width", "batch", "nan"],
)
def test_input_contract_checks_the_condition(change, message):
    model = keras_attn.build_transformer_model(TINY, conditional_layer_norm=3)
    inputs = batch()
    inputs.update(change)
    inputs = {k: v for k, v in inputs.items() if v is not None}
    with pytest.raises(InputError, match=message):
        model(inputs)


def test_plain_model_rejects_a_condition():
    model = keras_attn.build_transformer_model(TINY)
    with pytest.raises(InputError, match=r"Unknown input key\(s\) \['condition'\]"):
        model(batch())


def test_conditional_width_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="`conditional_layer_norm` is the width.*received True"):
        keras_attn.build_transformer_model(TINY, conditional_layer_norm=True)


def test_dataset_with_a_condition_is_checked_and_predicted():
    tf = pytest.importorskip("tensorflow")
    model = keras_attn.build_transformer_model(TINY, conditional_layer_norm=3)
    inputs = batch()
    dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(2)
    np.testing.assert_allclose(
        np.asarray(model.predict(dataset, verbose=0)), predict(model, inputs), atol=1e-5
    )
    bad = dict(inputs, token_ids=np.where(inputs["token_ids"] > 5, 40, inputs["token_ids"]))
    with pytest.raises(Exception, match=r"token_ids.{0,2} holds 40 at \(\d, \d\); it must be in \[0, 40\)"):
        model.predict(tf.data.Dataset.from_tensor_slices(bad).batch(2), verbose=0)
