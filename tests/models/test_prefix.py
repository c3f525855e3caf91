"""`prefix=`: two builder models from one checkpoint in one functional
graph (BERT-of-Theseus), loading, inputs and `.keras` files unchanged."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints import UnusedWeightsWarning
from keras_attn.layers import BinaryRandomChoice
from tests.harness import to_numpy

TOKENS = np.array([[2, 15, 40, 7, 3, 0, 0], [2, 9, 9, 81, 55, 66, 3]], "int32")
INPUTS = {"token_ids": TOKENS, "segment_ids": np.zeros_like(TOKENS)}


@pytest.fixture(scope="module")
def models(tf_bert_checkpoint):
    config, checkpoint, _ = tf_bert_checkpoint
    plain = keras_attn.build_transformer_model(config, checkpoint)
    predecessor = keras_attn.build_transformer_model(config, checkpoint, prefix="Predecessor-")
    with pytest.warns(UnusedWeightsWarning, match="layer_1/"):
        successor = keras_attn.build_transformer_model(
            config, checkpoint, prefix="Successor-", num_hidden_layers=1
        )
    return plain, predecessor, successor


def theseus(predecessor, successor, replacement_rate):
    """The BERT-of-Theseus graph: embeddings, then each successor block in
    place of its group of predecessor blocks, chosen at random."""
    old, new = predecessor.template, successor.template
    inputs = predecessor.named_inputs
    old_hidden, new_hidden = old.apply_embeddings(inputs), new.apply_embeddings(inputs)
    old_arguments = old.block_arguments(inputs, old_hidden)
    new_arguments = new.block_arguments(inputs, new_hidden)
    hidden = BinaryRandomChoice(replacement_rate, seed=3)(old_hidden, new_hidden)
    per_module = old.config.num_layers // new.config.num_layers
    for index in range(new.config.num_layers):
        old_hidden = hidden
        for offset in range(per_module):
            old_hidden = old.apply_main_layer(old_hidden, per_module * index + offset, *old_arguments)
        new_hidden = new.apply_main_layer(hidden, index, *new_arguments)
        hidden = BinaryRandomChoice(replacement_rate, seed=4 + index)(old_hidden, new_hidden)
    return keras.Model(predecessor.inputs, hidden)


def test_prefixed_models_load_the_checkpoint_as_the_plain_one(models):
    plain, predecessor, successor = models
    assert predecessor.get_layer("Predecessor-Embedding-Token") is not None
    assert all(w.path.startswith("Predecessor-") for w in predecessor.weights)
    plain_weights = {w.path: to_numpy(w) for w in plain.weights}
    for weight in predecessor.weights:
        np.testing.assert_array_equal(
            to_numpy(weight), plain_weights[weight.path.removeprefix("Predecessor-")]
        )
    assert len(successor.weights) < len(predecessor.weights)
    for weight in successor.weights:
        np.testing.assert_array_equal(
            to_numpy(weight), plain_weights[weight.path.removeprefix("Successor-")]
        )
    assert [i.name for i in predecessor.inputs] == [i.name for i in plain.inputs]
    np.testing.assert_allclose(
        to_numpy(predecessor(INPUTS)), to_numpy(plain(INPUTS)), atol=1e-6
    )
    np.testing.assert_allclose(
        to_numpy(predecessor.predict([TOKENS, np.zeros_like(TOKENS)], verbose=0)),
        to_numpy(plain(INPUTS)),
        atol=1e-5,
    )


def test_the_template_takes_bert4keras_list_inputs(models):
    """Issue 34, item 16: the Theseus recipe as bert4keras writes it,
    `apply_embeddings(model.inputs)`, was "list indices must be integers".
    The list is read in the model's input order: the same graph as
    `model.named_inputs` gives."""
    _, predecessor, _ = models
    template = predecessor.template

    def blocks(inputs):
        hidden = template.apply_embeddings(inputs)
        arguments = template.block_arguments(inputs, hidden)
        for index in range(template.config.num_layers):
            hidden = template.apply_main_layer(hidden, index, *arguments)
        return keras.Model(predecessor.inputs, hidden)

    by_list, by_name = blocks(predecessor.inputs), blocks(predecessor.named_inputs)
    np.testing.assert_allclose(
        to_numpy(by_list(INPUTS)), to_numpy(by_name(INPUTS)), atol=1e-6
    )
    np.testing.assert_allclose(to_numpy(by_list(INPUTS)), to_numpy(predecessor(INPUTS)), atol=1e-5)
    with pytest.raises(TypeError, match=r"keys \['token_ids', 'segment_ids'\] \(`model.named_inputs`\).*list of 1"):
        template.apply_embeddings(predecessor.inputs[:1])


def test_two_prefixed_models_share_one_graph(models):
    _, predecessor, successor = models
    model = theseus(predecessor, successor, replacement_rate=0.5)
    names = [layer.name for layer in model.layers]
    assert len(names) == len(set(names))
    assert "Successor-Transformer-0-FeedForward" in names
    assert "Predecessor-Transformer-1-FeedForward" in names
    # Inference runs the successor alone.
    np.testing.assert_allclose(
        to_numpy(model(INPUTS)), to_numpy(successor(INPUTS)), atol=1e-5
    )


def test_training_with_rate_zero_runs_the_predecessor(models):
    _, predecessor, successor = models
    model = theseus(predecessor, successor, replacement_rate=0.0)
    np.testing.assert_allclose(
        to_numpy(model(INPUTS, training=True)), to_numpy(predecessor(INPUTS)), atol=1e-5
    )
    everywhere = theseus(predecessor, successor, replacement_rate=1.0)
    np.testing.assert_allclose(
        to_numpy(everywhere(INPUTS, training=True)), to_numpy(successor(INPUTS)), atol=1e-5
    )


def test_unprefixed_models_cannot_share_a_graph(tf_bert_checkpoint):
    config, checkpoint, _ = tf_bert_checkpoint
    first = keras_attn.build_transformer_model(config, num_hidden_layers=1)
    second = keras_attn.build_transformer_model(config, num_hidden_layers=1)
    with pytest.raises(ValueError, match="unique"):
        theseus(first, second, 0.5)


def test_keras_file_keeps_the_prefix(models, tmp_path):
    _, _, successor = models
    path = str(tmp_path / "successor.keras")
    successor.save(path)
    restored = keras.models.load_model(path)
    assert sorted(layer.name for layer in restored.layers) == sorted(
        layer.name for layer in successor.layers
    )
    np.testing.assert_allclose(to_numpy(restored(INPUTS)), to_numpy(successor(INPUTS)), atol=1e-6)
    template = restored.template
    assert template.prefix == "Successor-"
    assert template.blocks[0].attention is restored.get_layer(
        "Successor-Transformer-0-MultiHeadSelfAttention"
    )


@pytest.mark.parametrize("prefix", [3, "a/b"])
def test_bad_prefix_is_refused(tf_bert_checkpoint, prefix):
    config, _, _ = tf_bert_checkpoint
    with pytest.raises(ValueError, match="prefix"):
        keras_attn.build_transformer_model(config, prefix=prefix, num_hidden_layers=1)


def test_t5_refuses_a_prefix():
    config = dict(
        model_type="t5", vocab_size=64, d_model=16, d_kv=8, d_ff=24, num_layers=1,
        num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=12,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )
    with pytest.raises(ValueError, match="does not take a `prefix`"):
        keras_attn.build_transformer_model(config, prefix="Successor-")


def test_the_freezing_recipe_works_on_every_backend():
    """Issue 34, item 19: Keras 3 reads `trainable` when a model's first
    `fit` builds its step, not at `compile` (bert4keras's Keras 2), and a
    change after that `fit` is ignored on TensorFlow and an error on JAX.
    The guide's recipe: train the predecessor, freeze it, then build and
    compile the model trained next. Its frozen weights stay, the rest
    train."""
    tiny = dict(vocab_size=90, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=24, max_position_embeddings=8, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)
    predecessor = keras_attn.build_transformer_model(tiny, prefix="Predecessor-")
    successor = keras_attn.build_transformer_model(tiny, prefix="Successor-", num_hidden_layers=1)
    targets = np.random.default_rng(0).normal(size=TOKENS.shape + (16,)).astype("float32")

    def fit(model):
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=False)
        model.fit(INPUTS, targets, batch_size=2, epochs=1, verbose=0)

    def values(model):
        return [to_numpy(w).copy() for w in model.weights]

    start = values(predecessor)
    fit(keras.Model(predecessor.inputs, predecessor.output))
    trained = values(predecessor)
    assert any(not np.array_equal(a, b) for a, b in zip(start, trained))

    for layer in predecessor.layers:
        layer.trainable = False
    successor_start = values(successor)
    # Rate 0: the loss runs through the predecessor alone, which would
    # train were it not frozen; rate 1: through the successor alone.
    fit(theseus(predecessor, successor, replacement_rate=0.0))
    for a, b in zip(trained, values(predecessor)):
        np.testing.assert_array_equal(a, b)
    fit(theseus(predecessor, successor, replacement_rate=1.0))
    assert any(not np.array_equal(a, b) for a, b in zip(successor_start, values(successor)))


def test_a_new_layer_at_a_freed_layers_address_is_prefixed(models):
    """Binding a template to a built model creates layers and drops them;
    CPython then hands a freed layer's address (its `id`) to the next one.
    The template once remembered renamed layers by `id` alone, so a later
    layer at a reused address kept its bare name ("creates a layer named
    'Transformer-0-FeedForward-Add' that the model does not have" after a
    long test run)."""
    _, predecessor, _ = models
    template = keras_attn.models.Bert(predecessor.template.config, prefix="P-")
    for index in range(50):
        layer = template.prefixed(keras.layers.Add(name=f"add-{index}"))
        assert layer.name == f"P-add-{index}"
        del layer
