"""Loading checkpoints into built models: the variant a config asks for,
unused weights, untied decoders, all-or-nothing loading, clear errors."""

import json
import os
import shutil
import warnings

import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints import CheckpointError
from keras_attn.checkpoints import UnusedWeightsWarning
from keras_attn.models.builder import select_variant
from keras_attn.models.transformer_config import TransformerConfig
from keras_attn.models.config_files import load_config
from tests.harness import to_numpy
from tests.checkpoint_files import SMALL
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint

TOLERANCE = 1e-4


def tokens_for(vocab_size, pad_id, seed=0, lengths=(9, 6, 3)):
    rng = np.random.default_rng(seed)
    tokens = np.full((len(lengths), max(lengths)), pad_id, "int32")
    for row, real in enumerate(lengths):
        ids = rng.integers(2, vocab_size, size=real)
        tokens[row, :real] = np.where(ids == pad_id, pad_id + 1, ids)
    return tokens


def transformers_logits(directory, model_class, tokens, pad_id):
    import torch
    import transformers

    model = getattr(transformers, model_class).from_pretrained(directory).eval()
    with torch.no_grad():
        output = model(
            input_ids=torch.tensor(tokens, dtype=torch.long),
            attention_mask=torch.tensor(tokens != pad_id, dtype=torch.long),
        )
    return output.logits.numpy()


def max_difference_on_real_tokens(actual, expected, tokens, pad_id):
    real = tokens != pad_id
    return np.abs(to_numpy(actual)[real] - expected[real]).max()


def bert_inputs(tokens):
    return {"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}


def values(model):
    return [to_numpy(variable).copy() for variable in model.weights]


def assert_unchanged(model, before):
    after = values(model)
    assert len(after) == len(before)
    for variable, old, new in zip(model.weights, before, after):
        np.testing.assert_array_equal(new, old, err_msg=variable.path)


# 1. The variant the checkpoint's family asks for --------------------------------


def test_roberta_directory_without_variant_matches_transformers(hf_roberta_dir):
    tokens = tokens_for(99, 1, seed=1)
    model = keras_attn.build_transformer_model(hf_roberta_dir, application="mlm")
    expected = transformers_logits(hf_roberta_dir, "RobertaForMaskedLM", tokens, pad_id=1)
    difference = max_difference_on_real_tokens(model({"token_ids": tokens}), expected, tokens, 1)
    assert difference <= TOLERANCE, difference


def test_roberta_directory_with_bert_variant_is_an_error(hf_roberta_dir):
    with pytest.raises(ValueError, match="variant='roberta'"):
        keras_attn.build_transformer_model(hf_roberta_dir, variant="bert")
    # A BERT-shaped variant would read the positions one row off as well.
    with pytest.raises(ValueError, match="variant='roberta'"):
        keras_attn.build_transformer_model(hf_roberta_dir, variant="talking_heads")


def test_bert_checkpoints_with_roberta_variant_are_errors(hf_bert_dir, tf_bert_checkpoint):
    with pytest.raises(ValueError, match="variant='bert'"):
        keras_attn.build_transformer_model(hf_bert_dir, variant="roberta")
    config, prefix, _ = tf_bert_checkpoint  # Google's bert_config.json: no model_type
    with pytest.raises(ValueError, match="variant='bert'"):
        keras_attn.build_transformer_model(config, prefix, variant="roberta")


def test_variant_defaults_follow_the_config():
    base = dict(SMALL)
    assert select_variant(load_config(base)) == "bert"
    assert select_variant(load_config(dict(base, model_type="roberta"))) == "roberta"
    assert select_variant(load_config(dict(base, model_type="xlm-roberta"))) == "roberta"
    assert select_variant(load_config(dict(base, embedding_size=16))) == "roberta+"
    # A dict naming no family takes any variant (random initialisation).
    assert select_variant(load_config(base), "roberta") == "roberta"
    assert select_variant(load_config(dict(base, model_type="bert")), "alibi") == "alibi"
    assert select_variant(load_config(dict(base, model_type="albert"))) == "albert"
    assert select_variant(load_config(dict(base, num_hidden_groups=1))) == "albert"
    assert select_variant(load_config(dict(base, model_type="electra"))) == "electra"
    assert select_variant(load_config(dict(base, model_type="albert")), "albert_unshared") == "albert_unshared"
    with pytest.raises(ValueError, match="ernie"):
        load_config(dict(base, model_type="ernie"))


# 2. Unused checkpoint weights are listed ------------------------------------------


def unused_warning(record):
    found = [w for w in record if issubclass(w.category, UnusedWeightsWarning)]
    assert len(found) == 1, [str(w.message) for w in record]
    return str(found[0].message)


def test_fewer_layers_than_the_checkpoint_warns(hf_bert_dir, tf_bert_checkpoint):
    with pytest.warns(UnusedWeightsWarning) as record:
        keras_attn.build_transformer_model(hf_bert_dir, num_hidden_layers=1)
    message = unused_warning(record)
    assert "bert.encoder.layer.1.attention.self.query.weight" in message
    assert "bert.encoder.layer.1.output.LayerNorm.bias" in message
    assert "16 weights" in message  # exactly the 16 tensors of block 1
    assert "layer.0" not in message and "cls." not in message

    config, prefix, _ = tf_bert_checkpoint
    with pytest.warns(UnusedWeightsWarning) as record:
        keras_attn.build_transformer_model(config, prefix, num_hidden_layers=1)
    message = unused_warning(record)
    assert "bert/encoder/layer_1/intermediate/dense/kernel" in message
    assert "global_step" not in message


def test_variant_without_learned_positions_warns(hf_bert_dir):
    with pytest.warns(UnusedWeightsWarning) as record:
        keras_attn.build_transformer_model(hf_bert_dir, variant="alibi")
    message = unused_warning(record)
    assert "bert.embeddings.position_embeddings.weight" in message
    assert "1 weights" in message


def test_larger_weights_file_is_refused_naming_its_layers(hf_bert_dir, tmp_path):
    """Keras' paths count layers by class and order: loading "the rest" of
    a 2-layer file gave a 1-layer model's MLM-Norm the file's
    Transformer-1-MultiHeadSelfAttention-Norm, with only a warning."""
    config = os.path.join(hf_bert_dir, "config.json")
    larger = keras_attn.build_transformer_model(hf_bert_dir, application="mlm")
    path = str(tmp_path / "larger.weights.h5")
    larger.save_weights(path)
    smaller = keras_attn.build_transformer_model(config, num_hidden_layers=1, application="mlm")
    before = values(smaller)
    with pytest.raises(CheckpointError) as raised:
        keras_attn.load_checkpoint(smaller, path)
    message = str(raised.value)
    assert "larger.weights.h5" in message and "has no place for (16)" in message
    assert "layers/multi_head_attention_1/key_dense/vars/0 " in message
    assert "(Transformer-1-MultiHeadSelfAttention/key_dense)" in message
    assert "(Transformer-1-FeedForward-Norm)" in message  # layer_normalization_4
    assert_unchanged(smaller, before)


def test_model_load_weights_refuses_another_depth_and_round_trips(tmp_path):
    """`model.load_weights` (Keras' own loaded a 2-layer file into a 1-layer
    model, dropping layer 1 silently) refuses files with other layers,
    naming them, and still loads a matching file exactly."""
    config = dict(SMALL, hidden_dropout_prob=0.0)
    tokens = tokens_for(99, 0)

    def build(layers):
        return keras_attn.build_transformer_model(config, num_hidden_layers=layers, application="mlm")

    two, one = build(2), build(1)
    two_path, one_path = str(tmp_path / "two.weights.h5"), str(tmp_path / "one.weights.h5")
    two.save_weights(two_path)
    one.save_weights(one_path)

    fresh = build(2)
    assert np.abs(to_numpy(fresh(bert_inputs(tokens))) - to_numpy(two(bert_inputs(tokens)))).max() > 1e-3
    fresh.load_weights(two_path)
    np.testing.assert_array_equal(to_numpy(fresh(bert_inputs(tokens))), to_numpy(two(bert_inputs(tokens))))

    before = values(one)
    with pytest.raises(ValueError) as raised:
        one.load_weights(two_path)
    message = str(raised.value)
    assert "two.weights.h5" in message and "nothing was loaded" in message
    assert "has no place for" in message and "lacks" not in message
    assert "(Transformer-1-MultiHeadSelfAttention/query_dense)" in message
    # The path both have: the file's block-1 norm where the model has MLM-Norm.
    assert (
        "layers/layer_normalization_3/vars/0: the file's "
        "Transformer-1-MultiHeadSelfAttention-Norm, the model's MLM-Norm"
    ) in message
    assert_unchanged(one, before)

    before = values(two)
    with pytest.raises(ValueError) as raised:
        two.load_weights(one_path)
    message = str(raised.value)
    assert "the model needs and the file lacks" in message
    assert "(Transformer-1-FeedForward/intermediate_dense)" in message
    assert_unchanged(two, before)


def test_complete_loads_do_not_warn(hf_bert_dir, hf_roberta_dir, tf_bert_checkpoint, tmp_path):
    config, prefix, _ = tf_bert_checkpoint
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnusedWeightsWarning)
        full = keras_attn.build_transformer_model(hf_bert_dir, application="mlm", with_nsp=True)
        # Heads the model is built without are a choice, not a loss.
        keras_attn.build_transformer_model(hf_bert_dir)
        keras_attn.build_transformer_model(hf_roberta_dir, application="mlm")
        keras_attn.build_transformer_model(config, prefix, application="mlm", with_nsp=True)
        keras_attn.build_transformer_model(hf_bert_dir, variant="talking_heads")
        path = str(tmp_path / "full.weights.h5")
        full.save_weights(path)
        keras_attn.build_transformer_model(
            os.path.join(hf_bert_dir, "config.json"), path, application="mlm", with_nsp=True
        )


# 3. Untied masked-LM decoders -----------------------------------------------------


@pytest.fixture(scope="module")
def hf_untied_dir(tmp_path_factory):
    """A random `BertForMaskedLM` whose decoder is its own matrix."""
    transformers = pytest.importorskip("transformers")
    model = transformers.BertForMaskedLM(
        transformers.BertConfig(**SMALL, tie_word_embeddings=False)
    )
    perturb(model, seed=2).eval()
    decoder = model.cls.predictions.decoder.weight.detach().numpy()
    embedding = model.bert.embeddings.word_embeddings.weight.detach().numpy()
    assert np.abs(decoder - embedding).max() > 0.1
    directory = tmp_path_factory.mktemp("hf_untied")
    model.save_pretrained(directory)
    return str(directory)


def test_untied_decoder_matches_transformers(hf_untied_dir):
    tokens = tokens_for(99, 0, seed=3)
    model = keras_attn.build_transformer_model(hf_untied_dir, application="mlm")
    assert model.get_layer("MLM-Decoder").kernel.shape == (32, 99)
    expected = transformers_logits(hf_untied_dir, "BertForMaskedLM", tokens, pad_id=0)
    difference = max_difference_on_real_tokens(model(bert_inputs(tokens)), expected, tokens, 0)
    assert difference <= TOLERANCE, difference


def test_untied_decoder_honours_keep_tokens(hf_untied_dir):
    keep = [0, 1, 5, 17, 42, 98, 3]
    full = keras_attn.build_transformer_model(hf_untied_dir, application="mlm")
    trimmed = keras_attn.build_transformer_model(hf_untied_dir, application="mlm", keep_tokens=keep)
    trimmed_ids = np.array([[2, 3, 4, 6, 5, 0]], "int32")
    full_ids = np.asarray(keep)[trimmed_ids].astype("int32")
    trimmed_logits = to_numpy(trimmed(bert_inputs(trimmed_ids)))
    full_logits = to_numpy(full(bert_inputs(full_ids)))
    np.testing.assert_allclose(trimmed_logits[0, :5], full_logits[0, :5][:, keep], atol=1e-5)


def test_untied_decoder_loaded_as_tied_warns(hf_untied_dir):
    with pytest.warns(UnusedWeightsWarning, match="cls.predictions.decoder.weight"):
        model = keras_attn.build_transformer_model(
            hf_untied_dir, application="mlm", tie_word_embeddings=True
        )
    assert "MLM-Decoder" not in {layer.name for layer in model.layers}


def test_google_format_has_no_untied_decoder(tf_bert_checkpoint):
    config, prefix, _ = tf_bert_checkpoint
    with pytest.raises(CheckpointError, match="MLM-Decoder/kernel"):
        keras_attn.build_transformer_model(
            config, prefix, application="mlm", tie_word_embeddings=False
        )


# 4. Loading is all or nothing -----------------------------------------------------


def test_failed_weights_file_load_changes_nothing(hf_bert_dir, tmp_path):
    import h5py

    config = os.path.join(hf_bert_dir, "config.json")
    source = keras_attn.build_transformer_model(config, with_pool=True)
    path = str(tmp_path / "other.weights.h5")
    source.save_weights(path)
    middle = "layers/feed_forward_1/intermediate_dense/vars/0"
    with h5py.File(path, "r+") as file:
        assert file[middle].shape == (32, 37)
        del file[middle]
        file[middle] = np.zeros((32, 36), "float32")
    model = keras_attn.build_transformer_model(hf_bert_dir, with_pool=True)
    before = values(model)
    with pytest.raises(CheckpointError) as raised:
        keras_attn.load_checkpoint(model, path)
    message = str(raised.value)
    assert middle in message and "(32, 37)" in message and "(32, 36)" in message
    assert_unchanged(model, before)


def test_weights_file_failure_inside_keras_restores_every_variable(hf_bert_dir, tmp_path, monkeypatch):
    config = os.path.join(hf_bert_dir, "config.json")
    source = keras_attn.build_transformer_model(config)
    path = str(tmp_path / "other.weights.h5")
    source.save_weights(path)
    model = keras_attn.build_transformer_model(hf_bert_dir)
    before = values(model)
    assert any(
        not np.array_equal(old, to_numpy(new)) for old, new in zip(before, source.weights)
    )

    norm_class = type(model.get_layer("Transformer-1-FeedForward-Norm"))
    original = norm_class.load_own_variables

    def fail_late(layer, store):
        # A layer late in the model fails after Keras has loaded the earlier ones.
        if layer.name == "Transformer-1-FeedForward-Norm":
            raise OSError("simulated read failure")
        return original(layer, store)

    monkeypatch.setattr(norm_class, "load_own_variables", fail_late)
    with pytest.raises(Exception, match="simulated read failure"):
        keras_attn.load_checkpoint(model, path)
    assert_unchanged(model, before)


def test_failed_checkpoint_load_changes_nothing(tf_bert_checkpoint, tmp_path):
    config, _, arrays = tf_bert_checkpoint
    broken = dict(arrays)
    broken["bert/encoder/layer_1/output/dense/kernel"] = np.zeros((37, 30), "float32")
    prefix = write_tf_checkpoint(str(tmp_path / "broken.ckpt"), broken)
    model = keras_attn.build_transformer_model(config)
    before = values(model)
    with pytest.raises(CheckpointError, match="output_dense/kernel"):
        keras_attn.load_checkpoint(model, prefix)
    assert_unchanged(model, before)


# 5. Clear errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, named",
    [
        ("num_hidden_layers", "2", "num_layers"),
        ("hidden_size", 31.5, "hidden_size"),
        ("hidden_dropout_prob", "0.1", "dropout_rate"),
        ("hidden_act", 3, "hidden_act"),
        ("num_attention_heads", 0, "num_heads"),
        ("attention_probs_dropout_prob", 1.0, "attention_dropout_rate"),
        ("type_vocab_size", True, "segment_vocab_size"),
        ("tie_word_embeddings", "false", "tie_word_embeddings"),
        ("layer_norm_eps", -1e-5, "layer_norm_epsilon"),
        ("pad_token_id", 99, "pad_token_id"),
    ],
)
def test_config_field_of_wrong_type_or_range_is_named(tmp_path, field, value, named):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(SMALL, **{field: value})))
    with pytest.raises(ValueError) as raised:
        load_config(str(path))
    message = str(raised.value)
    assert named in message and repr(value) in message and "config.json" in message


def test_field_checks_apply_to_overrides_and_direct_construction():
    with pytest.raises(ValueError, match="overrides.*hidden_size.*True"):
        load_config(SMALL, hidden_size=True)
    with pytest.raises(ValueError, match="num_layers.*-1"):
        TransformerConfig(vocab_size=5, hidden_size=4, num_layers=-1, num_heads=1, intermediate_size=4)
    assert load_config(SMALL, dropout_rate=0).dropout_rate == 0


def test_directory_without_weights_and_missing_shard(hf_bert_dir, tmp_path):
    shutil.copy(os.path.join(hf_bert_dir, "config.json"), tmp_path / "config.json")
    with pytest.raises(FileNotFoundError, match="config.json"):
        keras_attn.build_transformer_model(str(tmp_path))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(FileNotFoundError) as raised:
        keras_attn.build_transformer_model(str(tmp_path))
    assert "model-00001-of-00002.safetensors" in str(raised.value)
    assert "model.safetensors.index.json" in str(raised.value)


def test_truncated_safetensors_in_a_directory_is_named(hf_bert_dir, tmp_path):
    shutil.copy(os.path.join(hf_bert_dir, "config.json"), tmp_path / "config.json")
    with open(os.path.join(hf_bert_dir, "model.safetensors"), "rb") as file:
        data = file.read()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) - 100])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        keras_attn.build_transformer_model(str(tmp_path))
