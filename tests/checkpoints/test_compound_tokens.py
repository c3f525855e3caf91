"""`compound_tokens`: new vocabulary entries initialised as the mean of
existing ones, checked against numpy on the checkpoint's own arrays."""

import os

import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints import CheckpointError
from tests.checkpoint_files import SMALL
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

KEEP = [0, 1, 2, 3, 17, 42, 98, 5]
# Ids into the kept vocabulary when KEEP is given, else into the full one.
GROUPS = [[4], [5, 6], [7, 4, 4, 1]]


def reference(array, keep, groups):
    """The expected rows: `array[keep]`, then each group's mean, in numpy."""
    kept = array if keep is None else array[np.asarray(keep)]
    means = [np.mean(np.stack([kept[i] for i in group]), axis=0) for group in groups]
    return np.concatenate([kept, np.stack(means)], axis=0)


def mlm_weights(model):
    return (
        to_numpy(model.get_layer("Embedding-Token").embeddings),
        to_numpy(model.get_layer("MLM-Bias").bias),
    )


@pytest.fixture(scope="module")
def hf_arrays(hf_bert_dir):
    from safetensors.numpy import load_file

    state = load_file(os.path.join(hf_bert_dir, "model.safetensors"))
    return state["bert.embeddings.word_embeddings.weight"], state["cls.predictions.bias"]


def test_google_checkpoint_rows_and_bias_are_means_after_keep_tokens(tf_bert_checkpoint):
    config, prefix, arrays = tf_bert_checkpoint
    model = keras_attn.build_transformer_model(
        config, prefix, application="mlm", keep_tokens=KEEP, compound_tokens=GROUPS
    )
    embeddings, bias = mlm_weights(model)
    assert embeddings.shape == (len(KEEP) + len(GROUPS), 32)
    expected_rows = reference(arrays["bert/embeddings/word_embeddings"], KEEP, GROUPS)
    expected_bias = reference(arrays["cls/predictions/output_bias"], KEEP, GROUPS)
    np.testing.assert_allclose(embeddings, expected_rows, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(bias, expected_bias, rtol=1e-6, atol=1e-7)
    # The group [7, 4, 4, 1] weights kept id 4 twice, as a plain mean of the list does.
    assert not np.allclose(embeddings[-1], embeddings[[7, 4, 1]].mean(axis=0))
    assert model.input_contract.limits["token_ids"] == len(KEEP) + len(GROUPS)


def test_huggingface_directory_keeps_its_rows_and_appends_means(hf_bert_dir, hf_arrays):
    words, bias_array = hf_arrays
    groups = [[10, 20], [98], [0, 50, 60]]
    model = keras_attn.build_transformer_model(
        hf_bert_dir, application="mlm", compound_tokens=groups
    )
    embeddings, bias = mlm_weights(model)
    assert embeddings.shape == (99 + 3, 32)
    np.testing.assert_array_equal(embeddings[:99], words)
    np.testing.assert_allclose(embeddings[99:], reference(words, None, groups)[99:], rtol=1e-6)
    np.testing.assert_array_equal(bias[:99], bias_array)
    np.testing.assert_allclose(bias[99:], reference(bias_array, None, groups)[99:], rtol=1e-6)
    # A new token's logits come from its new row: run the model on it.
    ids = np.array([[2, 100, 101, 7]], "int32")
    logits = to_numpy(model({"token_ids": ids, "segment_ids": np.zeros_like(ids)}))
    assert logits.shape == (1, 4, 102)


def test_load_checkpoint_takes_compound_tokens(tf_bert_checkpoint):
    config, prefix, arrays = tf_bert_checkpoint
    model = keras_attn.build_transformer_model(config, application="mlm", vocab_size=99 + 2)
    keras_attn.load_checkpoint(model, prefix, compound_tokens=[[3, 9], [11]])
    embeddings, bias = mlm_weights(model)
    expected = reference(arrays["bert/embeddings/word_embeddings"], None, [[3, 9], [11]])
    np.testing.assert_allclose(embeddings, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        bias, reference(arrays["cls/predictions/output_bias"], None, [[3, 9], [11]]), rtol=1e-6
    )


def test_untied_decoder_gets_mean_columns(tmp_path):
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertForMaskedLM(transformers.BertConfig(**SMALL, tie_word_embeddings=False))
    perturb(hf, seed=4).eval()
    hf.save_pretrained(tmp_path)
    decoder = hf.cls.predictions.decoder.weight.detach().numpy()  # (vocab, hidden)
    keep, groups = [4, 8, 15, 16, 23, 42], [[0, 5], [2]]
    model = keras_attn.build_transformer_model(
        str(tmp_path), application="mlm", keep_tokens=keep, compound_tokens=groups
    )
    kernel = to_numpy(model.get_layer("MLM-Decoder").kernel)  # (hidden, vocab)
    assert kernel.shape == (32, 8)
    np.testing.assert_allclose(kernel.T, reference(decoder, keep, groups), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "groups, keep, message",
    [
        ([[1], []], None, r"compound_tokens\[1\] is empty"),
        ([[1, 99]], None, r"compound_tokens\[0\] holds ids outside the vocabulary of 99 .*\[99\]"),
        ([[7, 8]], KEEP, r"outside the vocabulary of 8 tokens \(after keep_tokens\): \[8\]"),
        ([[-1]], None, r"\[-1\]"),
        ([["a"]], None, r"holds 'a', which is not a vocabulary id"),
        ([[1.5]], None, r"1.5, which is not a vocabulary id"),
        ([3, 4], None, r"compound_tokens\[0\] must be a list"),
    ],
)
def test_bad_compound_tokens_are_refused_before_building(tf_bert_checkpoint, groups, keep, message):
    config, prefix, _ = tf_bert_checkpoint
    with pytest.raises(ValueError, match=message):
        keras_attn.build_transformer_model(
            config, prefix, application="mlm", keep_tokens=keep, compound_tokens=groups
        )


def test_load_checkpoint_refuses_ids_beyond_the_checkpoint(tf_bert_checkpoint):
    config, prefix, _ = tf_bert_checkpoint
    model = keras_attn.build_transformer_model(config, application="mlm", vocab_size=101)
    before = to_numpy(model.get_layer("Embedding-Token").embeddings)
    with pytest.raises(CheckpointError, match=r"compound_tokens has ids outside the 99 .*\[120\]"):
        keras_attn.load_checkpoint(model, prefix, compound_tokens=[[120], [1]])
    np.testing.assert_array_equal(to_numpy(model.get_layer("Embedding-Token").embeddings), before)


def test_load_checkpoint_refuses_keep_tokens_beyond_the_checkpoint(tf_bert_checkpoint):
    config, prefix, _ = tf_bert_checkpoint
    model = keras_attn.build_transformer_model(config, application="mlm", vocab_size=4)
    with pytest.raises(CheckpointError, match=r"keep_tokens has ids outside the 99 vocabulary "
                                              r"entries of .*: \[-1, 150\]"):
        keras_attn.load_checkpoint(model, prefix, keep_tokens=[0, 150, -1, 150])
