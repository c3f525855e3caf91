"""The conventions bert4keras scripts rely on: list inputs, bert4keras's
builder keywords, Keras masks on the outputs, and `skip_missing` for
encoder-only checkpoints."""

import json
import os
import warnings

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.models.input_contract import InputError
from tests.harness import BACKEND
from keras_attn.models import VARIANTS
from tests.harness import to_numpy

# One application per variant, read at collection (tests registering variants
# of their own add none).
VARIANTS_AT_COLLECTION = dict(VARIANTS)
REGISTERED_APPLICATIONS = {
    name: variant.applications[0] for name, variant in VARIANTS_AT_COLLECTION.items()
}

VOCAB = 30
TINY = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=10,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
MLM_HEAD = ["MLM-Bias/bias", "MLM-Dense/bias", "MLM-Dense/kernel", "MLM-Norm/beta", "MLM-Norm/gamma"]


def build(config=None, **arguments):
    keras.utils.set_random_seed(0)
    return keras_attn.build_transformer_model(dict(TINY, **(config or {})), **arguments)


@pytest.fixture(scope="module")
def bert():
    return build()


def token_and_segment_ids():
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, VOCAB, size=(2, 6)).astype("int32")
    token_ids[0, 4:] = 0  # padding
    segment_ids = (np.arange(6)[None] >= 3).astype("int32").repeat(2, axis=0)
    return token_ids, segment_ids


# 1. List inputs ---------------------------------------------------------------


def test_list_inputs_equal_dict_inputs_in_every_entry(bert):
    token_ids, segment_ids = token_and_segment_ids()
    as_dict = {"token_ids": token_ids, "segment_ids": segment_ids}
    expected = to_numpy(bert(as_dict))
    # The segments change the output, so a swapped order could not pass.
    assert np.abs(expected - to_numpy(bert([token_ids, 0 * segment_ids]))).max() > 1e-3
    np.testing.assert_allclose(to_numpy(bert((token_ids, segment_ids))), expected, atol=1e-6)
    inputs = [token_ids, segment_ids]
    np.testing.assert_allclose(to_numpy(bert(inputs)), expected, atol=1e-6)
    np.testing.assert_allclose(bert.predict(inputs, verbose=0), expected, atol=1e-5)
    symbolic = [keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")]
    assert tuple(bert(symbolic).shape) == (None, None, 16)


@pytest.mark.parametrize("variant", sorted(VARIANTS_AT_COLLECTION))
def test_wrapped_model_takes_lists_in_the_order_of_model_inputs(variant):
    """bert4keras's everyday `keras.Model(bert.inputs, f(bert.output))`,
    called with `[token_ids, segment_ids, ...]`, reads them in that order:
    `model.inputs` is the documented positional order (Keras' own order for
    a dict of inputs, sorted by name, would put `segment_ids` first). And
    every inner layer's output carries the padding mask."""
    from tests.models.test_variants import CONFIG
    from tests.models.test_variants import VARIANT_FIELDS
    from tests.models.test_variants import inputs_for

    application = REGISTERED_APPLICATIONS[variant]
    for padding_mask_input in (False, True):
        model = keras_attn.build_transformer_model(
            dict(CONFIG, **VARIANT_FIELDS.get(variant, {})), variant=variant,
            application=application, padding_mask_input=padding_mask_input,
        )
        names = [tensor.name for tensor in model.inputs]
        contract = model.input_contract
        assert names == [name for name in contract.positional_names if name in contract.names]
        assert names[0].endswith("token_ids")
        inputs = inputs_for(model)
        if padding_mask_input:
            for name in [name for name in names if name.endswith("padding_mask")]:
                ids = inputs[name.replace("padding_mask", "token_ids")]
                inputs[name] = (ids != 0).astype("int32")
        first = None if not isinstance(model.output, dict) else sorted(model.output)[0]
        output = model.output if first is None else model.output[first]
        wrapped = keras.Model(model.inputs, keras.layers.Activation("tanh")(output))
        direct = model(inputs)
        expected = np.tanh(to_numpy(direct if first is None else direct[first]))
        np.testing.assert_allclose(to_numpy(wrapped(inputs)), expected, atol=1e-5)  # by name
        by_list = to_numpy(wrapped([inputs[name] for name in names]))
        np.testing.assert_allclose(by_list, expected, atol=1e-5)
        # The same list through `model.input` (also a list now).
        assert [tensor.name for tensor in model.input] == names
        assert_inner_layers_carry_the_mask(model)


def test_list_inputs_in_fit_evaluate_and_datasets():
    model = build()
    model.compile(loss="mse")
    token_ids, segment_ids = token_and_segment_ids()
    targets = np.ones((2, 6, 16), "float32")
    by_dict = model.evaluate({"token_ids": token_ids, "segment_ids": segment_ids}, targets, verbose=0)
    by_list = model.evaluate([token_ids, segment_ids], targets, verbose=0)
    assert abs(by_dict - by_list) < 1e-6
    bad = token_ids.copy()
    bad[1, 1] = VOCAB
    for entry in (model.fit, model.evaluate):
        with pytest.raises(InputError, match="vocab_size=30"):
            entry([bad, segment_ids], targets, verbose=0)
    if BACKEND != "tensorflow":
        return  # tf.data's path is the same on every backend; importing TF is not cheap
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(((token_ids, segment_ids), targets)).batch(2)
    assert abs(model.evaluate(dataset, verbose=0) - by_dict) < 1e-5
    with pytest.raises(Exception, match=r"holds 30 at \(1, 1\).*vocab_size=30"):
        model.evaluate(
            tf.data.Dataset.from_tensor_slices(((bad, segment_ids), targets)).batch(2), verbose=0
        )


def test_list_of_the_wrong_length_names_the_order(bert):
    token_ids, segment_ids = token_and_segment_ids()
    for inputs in ([token_ids], [token_ids, segment_ids, segment_ids]):
        with pytest.raises(InputError, match=r"\['token_ids', 'segment_ids'\]"):
            bert(inputs)


def test_list_with_padding_mask_and_models_without_token_types():
    token_ids, segment_ids = token_and_segment_ids()
    padding_mask = (token_ids != 0).astype("int32")
    masked = build(padding_mask_input=True)
    np.testing.assert_allclose(
        to_numpy(masked([token_ids, segment_ids, padding_mask])),
        to_numpy(masked({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})),
        atol=1e-6,
    )
    with pytest.raises(InputError, match="'segment_ids', 'padding_mask'"):
        masked([token_ids, segment_ids])
    single = build(dict(type_vocab_size=1, pad_token_id=1, max_position_embeddings=12), variant="roberta")
    expected = to_numpy(single({"token_ids": token_ids}))
    np.testing.assert_allclose(to_numpy(single([token_ids])), expected, atol=1e-6)
    np.testing.assert_allclose(to_numpy(single([token_ids, 0 * segment_ids])), expected, atol=1e-6)
    with pytest.raises(InputError, match="segment_ids.*not all zero"):
        single([token_ids, segment_ids])


# 2. bert4keras's builder keywords ------------------------------------------------


@pytest.fixture(scope="module")
def google_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("b4k") / "bert_config.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def weights_of(model):
    return {variable.path: to_numpy(variable) for variable in model.weights}


def test_bert4keras_keywords_build_the_same_model(google_config, tmp_path):
    keras.utils.set_random_seed(1)
    ours = keras_attn.build_transformer_model(google_config, variant="bert", application="mlm")
    checkpoint = str(tmp_path / "model.weights.h5")
    ours.save_weights(checkpoint)
    keras.utils.set_random_seed(2)  # other initial values, so the load must matter
    theirs = keras_attn.build_transformer_model(
        config_path=google_config, checkpoint_path=checkpoint, model="bert", with_mlm=True
    )
    expected, found = weights_of(ours), weights_of(theirs)
    assert sorted(found) == sorted(expected) and "MLM-Bias/bias" in found
    for path, value in expected.items():
        np.testing.assert_array_equal(found[path], value, err_msg=path)


def test_bert4keras_roberta_is_bert_format_and_albert_maps_by_name(google_config):
    keras.utils.set_random_seed(0)
    roberta = keras_attn.build_transformer_model(config_path=google_config, model="RoBERTa")
    keras.utils.set_random_seed(0)
    bert = keras_attn.build_transformer_model(google_config, variant="bert")
    assert sorted(weights_of(roberta)) == sorted(weights_of(bert))
    token_ids, segment_ids = token_and_segment_ids()
    np.testing.assert_allclose(
        to_numpy(roberta([token_ids, segment_ids])), to_numpy(bert([token_ids, segment_ids])), atol=1e-6
    )

    # model="albert" is variant "albert", which refuses a BERT config by name.
    with pytest.raises(ValueError, match="variant='albert' reads albert checkpoints"):
        keras_attn.build_transformer_model(config_path=google_config, model="albert")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(model="ernie"), "no ERNIE model.*model='bert'"),
        (dict(model="t5_decoder"), "t5_decoder.*not supported.*model='t5'"),
        (dict(model="bert", variant="bert"), "both variant= and bert4keras's model="),
        (dict(with_mlm="softmax"), "logits"),
        (dict(with_discriminator="sigmoid"), "application='discriminator'.*keras.ops.sigmoid"),
        (dict(layer_norm_cond="condition"), "conditional_layer_norm=<condition width>"),
        (dict(sequence_length=8), "pad"),
        (dict(return_keras_model=False), "always returns a keras.Model"),
        (dict(ignore_invalid_weights=True), "skip_missing="),
        (dict(hidden_sise=8), r"hidden_sise(.|\n)*config_path= -> config="),
    ],
)
def test_bert4keras_keywords_refused_say_what_to_write(google_config, arguments, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.build_transformer_model(google_config, **arguments)


def test_with_discriminator_builds_electras_discriminator():
    """Issue 34, item 18: bert4keras's `model="electra",
    with_discriminator=True` was refused as an unknown keyword without its
    replacement; it is `application="discriminator"` (logits), the same
    weights and outputs."""
    config = dict(embedding_size=8)
    theirs = build(config, model="electra", with_discriminator=True)
    ours = build(config, variant="electra", application="discriminator")
    assert sorted(weights_of(theirs)) == sorted(weights_of(ours))
    token_ids, segment_ids = token_and_segment_ids()
    np.testing.assert_array_equal(
        to_numpy(theirs([token_ids, segment_ids])), to_numpy(ours([token_ids, segment_ids]))
    )
    assert to_numpy(ours([token_ids, segment_ids])).shape == token_ids.shape
    # False leaves the encoder, as in bert4keras.
    assert build(config, model="electra", with_discriminator=False).application == "encoder"


def test_bert4keras_name_beside_ours_is_an_error(google_config):
    with pytest.raises(ValueError, match="both config= and bert4keras's config_path="):
        keras_attn.build_transformer_model(google_config, config_path=google_config)


def test_segment_vocab_size_is_an_override(google_config):
    model = keras_attn.build_transformer_model(google_config, segment_vocab_size=3)
    assert tuple(model.get_layer("Embedding-Segment").embeddings.shape) == (3, 16)


# 4. Keras masks ------------------------------------------------------------------


def masked_mean(values, keep):
    keep = keep.astype("float64")[..., None]
    return (values * keep).sum(axis=1) / keep.sum(axis=1)


@pytest.mark.parametrize("padding_mask_input", [False, True])
def test_outputs_carry_the_padding_mask(padding_mask_input, tmp_path):
    model = build(padding_mask_input=padding_mask_input, with_pool=True)
    token_ids, segment_ids = token_and_segment_ids()
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids}
    keep = token_ids != 0
    if padding_mask_input:
        # Padding other than the pad id: the explicit mask decides.
        keep = keep.copy()
        keep[1, 5] = False
        inputs["padding_mask"] = keep.astype("int32")
    pooled = keras.layers.GlobalAveragePooling1D()(model.output["sequence_output"])
    head = model.with_outputs(pooled)
    sequence = to_numpy(model(inputs)["sequence_output"])
    expected = masked_mean(sequence, keep)
    assert np.abs(expected - sequence.mean(axis=1)).max() > 1e-3  # the mask matters
    np.testing.assert_allclose(to_numpy(head(inputs)), expected, atol=1e-5)
    if not padding_mask_input:
        np.testing.assert_allclose(head.predict(inputs, verbose=0), expected, atol=1e-5)
        return
    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    pooled = keras.layers.GlobalAveragePooling1D()(reloaded.output["sequence_output"])
    np.testing.assert_allclose(to_numpy(reloaded.with_outputs(pooled)(inputs)), expected, atol=1e-5)


# Layers whose outputs are not the padded hidden states: the embedding
# lookups and their sum (the mask goes on after it, `Embedding-Mask`), the
# attention mask and the position biases.
UNMASKED = ("Embedding-Token", "Embedding-Segment", "Embedding-Position", "Embedding-Add",
            "Attention-Mask", "Position-Bias", "Embedding-Relative-Position")


def assert_inner_layers_carry_the_mask(model):
    """Every layer's sequence output, bar those in `UNMASKED`, has a Keras
    mask (bert4keras carried it through every layer)."""
    checked = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer) or any(
            part in layer.name for part in UNMASKED
        ):
            continue
        for node in layer._inbound_nodes:
            for output in keras.tree.flatten(node.output_tensors):
                if len(output.shape) >= 3:
                    assert getattr(output, "_keras_mask", None) is not None, layer.name
                    checked.append(layer.name)
    # The blocks' norms were among them (GAU-alpha's blocks have no feed-forward).
    assert any("Transformer" in name and "-Norm" in name for name in checked)


def test_crf_on_an_inner_layer_sees_the_padding():
    """bert4keras's `get_layer("Transformer-%d-FeedForward-Norm").output`
    under a CRF: the mask comes with the layer's output, so the CRF equals
    the CRF given the mask explicitly, and pooling averages real tokens."""
    model = build(dict(num_hidden_layers=2), padding_mask_input=True)
    token_ids, segment_ids = token_and_segment_ids()
    keep = token_ids != 0
    keep[1, 5] = False  # padding other than the pad id: the explicit mask decides
    inputs = [token_ids, segment_ids, keep.astype("int32")]
    inner = model.get_layer("Transformer-0-FeedForward-Norm").output
    emissions = keras.layers.Dense(3, name="emissions")(inner)
    crf = keras_attn.layers.ConditionalRandomField(name="crf")
    explicit_mask = keras.ops.cast(model.inputs[2], "bool")
    implicit = model.with_outputs(crf(emissions))
    explicit = model.with_outputs(crf(emissions, mask=explicit_mask))
    found = to_numpy(implicit(inputs))
    np.testing.assert_allclose(found, to_numpy(explicit(inputs)), atol=1e-6)
    assert np.all(found[~keep] < -1e3) and np.all(np.abs(found[keep]) < 1e3)
    pooled = model.with_outputs(keras.layers.GlobalAveragePooling1D()(inner))
    hidden = to_numpy(model.with_outputs(inner)(inputs))
    np.testing.assert_allclose(to_numpy(pooled(inputs)), masked_mean(hidden, keep), atol=1e-5)


def test_mlm_logits_carry_the_mask():
    model = build(application="mlm")
    token_ids, segment_ids = token_and_segment_ids()
    logits = to_numpy(model([token_ids, segment_ids]))
    pooled = keras.layers.GlobalAveragePooling1D()(model.output)
    found = to_numpy(model.with_outputs(pooled)([token_ids, segment_ids]))
    expected = masked_mean(logits, token_ids != 0)
    np.testing.assert_allclose(found, expected, atol=1e-5)
    assert np.abs(logits.mean(axis=1) - expected).max() > 1e-4


# 5. skip_missing -----------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder_only_dir(tmp_path_factory):
    """A random Hugging Face `BertModel`: an encoder without any head."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from tests.checkpoint_files import perturb

    config = transformers.BertConfig(**{k: v for k, v in TINY.items() if "dropout" not in k})
    model = perturb(transformers.BertModel(config, add_pooling_layer=False), seed=3).eval()
    directory = tmp_path_factory.mktemp("encoder_only")
    model.save_pretrained(directory)
    state = {name: value.detach().numpy() for name, value in model.state_dict().items()}
    return str(directory), state


@pytest.mark.parametrize("skip_missing", [("MLM-*",), ["MLM-Dense", "MLM-Norm", "MLM-Bias"]])
def test_skip_missing_loads_the_encoder_and_keeps_the_head(encoder_only_dir, skip_missing):
    directory, state = encoder_only_dir
    model = keras_attn.build_transformer_model(
        os.path.join(directory, "config.json"), application="mlm"
    )
    initial = weights_of(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keras_attn.load_checkpoint(model, directory, skip_missing=skip_missing)
    skipped = [w for w in caught if issubclass(w.category, keras_attn.SkippedWeightsWarning)]
    assert len(skipped) == 1
    listed = sorted(
        line.strip() for line in str(skipped[0].message).splitlines()[1:]
    )
    assert listed == MLM_HEAD
    loaded = weights_of(model)
    for path in MLM_HEAD:
        np.testing.assert_array_equal(loaded[path], initial[path])
    np.testing.assert_array_equal(
        loaded["Embedding-Token/embeddings"], state["embeddings.word_embeddings.weight"]
    )
    np.testing.assert_array_equal(
        loaded["Transformer-0-FeedForward/output_dense/kernel"],
        state["encoder.layer.0.output.dense.weight"].T,
    )
    assert np.abs(initial["Embedding-Token/embeddings"] - loaded["Embedding-Token/embeddings"]).max() > 0


def test_skip_missing_through_the_builder(encoder_only_dir):
    directory, _ = encoder_only_dir
    with pytest.warns(keras_attn.SkippedWeightsWarning, match="MLM-Dense/kernel"):
        model = keras_attn.build_transformer_model(directory, application="mlm", skip_missing="MLM-*")
    assert model.output.shape[-1] == VOCAB


def test_missing_head_without_opt_in_is_an_error_naming_it(encoder_only_dir):
    directory, _ = encoder_only_dir
    model = keras_attn.build_transformer_model(os.path.join(directory, "config.json"), application="mlm")
    initial = weights_of(model)
    with pytest.raises(keras_attn.CheckpointError) as raised:
        keras_attn.load_checkpoint(model, directory)
    message = str(raised.value)
    for path in MLM_HEAD:
        assert path in message
    assert "skip_missing=['MLM-Bias', 'MLM-Dense', 'MLM-Norm']" in message
    for path, value in weights_of(model).items():
        np.testing.assert_array_equal(value, initial[path])


@pytest.mark.parametrize("skip_missing", [["MLM-Typo"], ["MLM-*", "Pooler-*"]])
def test_skip_missing_entry_matching_nothing_is_an_error(encoder_only_dir, skip_missing):
    directory, _ = encoder_only_dir
    model = keras_attn.build_transformer_model(os.path.join(directory, "config.json"), application="mlm")
    with pytest.raises(ValueError, match=r"skip_missing entries \['(MLM-Typo|Pooler-\*)'\] match no weight"):
        keras_attn.load_checkpoint(model, directory, skip_missing=skip_missing)



def test_skip_missing_needs_a_pretrained_checkpoint(google_config, tmp_path):
    with pytest.raises(ValueError, match="skip_missing applies when a checkpoint is loaded"):
        keras_attn.build_transformer_model(google_config, skip_missing=["MLM-*"])
    model = keras_attn.build_transformer_model(google_config, application="mlm")
    path = str(tmp_path / "own.weights.h5")
    model.save_weights(path)
    with pytest.raises(ValueError, match="skip_missing applies to pretrained checkpoints"):
        keras_attn.load_checkpoint(model, path, skip_missing=["MLM-*"])
