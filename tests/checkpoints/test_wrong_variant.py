"""A checkpoint of one architecture is refused by a variant of another,
naming the right variant, instead of loading with a warning (issue 34,
items 5 and 13)."""

import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints.readers import CheckpointError
from tests.checkpoint_files import perturb

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROFORMER = dict(
    vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=20,
)


@pytest.fixture(scope="module")
def hf_roformer_dir(tmp_path_factory):
    model = transformers.RoFormerForMaskedLM(transformers.RoFormerConfig(**ROFORMER)).eval()
    directory = tmp_path_factory.mktemp("roformer_v1")
    model.save_pretrained(directory)
    return str(directory)


def test_a_hugging_face_roformer_is_refused_as_roformer_v2(hf_roformer_dir):
    with pytest.raises(ValueError, match=r"variant='roformer_v2'.*v1.*use variant='roformer'"):
        keras_attn.build_transformer_model(hf_roformer_dir, variant="roformer_v2")
    # The right variant loads it, without a warning.
    keras_attn.build_transformer_model(hf_roformer_dir, variant="roformer")


GPT2 = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=20,
)


def test_a_weights_file_of_another_variant_is_refused(tmp_path):
    gpt2 = keras_attn.build_transformer_model(GPT2, variant="gpt2")
    path = str(tmp_path / "gpt2.weights.h5")
    gpt2.save_weights(path)
    gpt2_ml = keras_attn.build_transformer_model(GPT2, variant="gpt2_ml")
    before = [np.array(w.numpy()) for w in gpt2_ml.weights]
    with pytest.raises(CheckpointError) as raised:
        keras_attn.load_checkpoint(gpt2_ml, path)
    message = str(raised.value)
    assert "gpt2.weights.h5" in message and "nothing was loaded" in message
    assert "Output-Norm" in message and "Embedding-Norm" in message
    for weight, value in zip(gpt2_ml.weights, before):
        np.testing.assert_array_equal(weight.numpy(), value)
    # The model it came from loads it.
    twin = keras_attn.build_transformer_model(GPT2, variant="gpt2")
    keras_attn.load_checkpoint(twin, path)
    ids = np.array([[3, 7, 9, 2]], "int32")
    np.testing.assert_array_equal(
        keras_attn_output(twin, ids), keras_attn_output(gpt2, ids)
    )


def keras_attn_output(model, ids):
    import keras

    return keras.ops.convert_to_numpy(model({"token_ids": ids}))


def test_a_bert_masked_lm_folder_under_roformer_names_the_bert_variant(tmp_path):
    config = transformers.BertConfig(**ROFORMER)
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError) as raised:
        keras_attn.build_transformer_model(tmp_path, variant="roformer", application="mlm")
    message = str(raised.value)
    assert "holds BERT weights" in message and "variant='bert'" in message
    assert "skip_missing" not in message


def test_a_weights_file_of_a_prefixed_model_loads_into_the_same_model_unprefixed(tmp_path):
    """`prefix=` renames every layer (BERT-of-Theseus' successor,
    `Successor-...`); its `.weights.h5` still belongs to the same model
    without the prefix, as bert4keras users reload a trained successor, and
    the other way round. Only layers named differently beyond the prefix
    make a file another variant's."""
    prefixed = keras_attn.build_transformer_model(GPT2, variant="gpt2", prefix="Successor-")
    path = str(tmp_path / "successor.weights.h5")
    prefixed.save_weights(path)
    plain = keras_attn.build_transformer_model(GPT2, variant="gpt2")
    keras_attn.load_checkpoint(plain, path)
    ids = np.array([[3, 7, 9, 2]], "int32")
    np.testing.assert_array_equal(keras_attn_output(plain, ids), keras_attn_output(prefixed, ids))
    back = keras_attn.build_transformer_model(GPT2, variant="gpt2", prefix="Successor-")
    plain_path = str(tmp_path / "plain.weights.h5")
    plain.save_weights(plain_path)
    keras_attn.load_checkpoint(back, plain_path)
    np.testing.assert_array_equal(keras_attn_output(back, ids), keras_attn_output(plain, ids))
