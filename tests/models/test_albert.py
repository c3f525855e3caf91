"""ALBERT: parity with `transformers` on random weights saved as Hugging
Face and as Google TF checkpoints, one shared block, its config rules and
its tokenizer.

The Google checkpoint is written here from the Hugging Face weights with
names spelt out independently of the library's tables."""

import json
import os
import re
import shutil

import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy

ALBERT = dict(
    vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=3,
    num_attention_heads=4, intermediate_size=37, max_position_embeddings=40,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, hidden_act="gelu",
    type_vocab_size=2, initializer_range=0.02,
)

# Hugging Face name (after `albert.`) -> Google name, for the shared block.
GOOGLE_BLOCK = {
    "attention.query": "attention_1/self/query",
    "attention.key": "attention_1/self/key",
    "attention.value": "attention_1/self/value",
    "attention.dense": "attention_1/output/dense",
    "attention.LayerNorm": "LayerNorm",
    "ffn": "ffn_1/intermediate/dense",
    "ffn_output": "ffn_1/intermediate/output/dense",
    "full_layer_layer_norm": "LayerNorm_1",
}


def google_albert_name(hf_name):
    """`AlbertForPreTraining` name -> Google ALBERT TF checkpoint name."""
    name = hf_name.removeprefix("albert.")
    block = re.match(r"encoder\.albert_layer_groups\.0\.albert_layers\.0\.(.+)\.(weight|bias)$", name)
    if block:
        module, kind = block.groups()
        name = f"bert/encoder/transformer/group_0/inner_group_0/{GOOGLE_BLOCK[module]}/{kind}"
    elif name.startswith(("embeddings.", "encoder.")):
        name = "bert/" + name.replace(".", "/")
    elif name.startswith("pooler."):
        name = "bert/pooler/dense/" + name.split(".")[1]
    elif name == "predictions.bias":
        name = "cls/predictions/output_bias"
    elif name.startswith("predictions."):
        name = "cls/predictions/transform/" + name.removeprefix("predictions.").replace(".", "/")
    elif name.startswith("sop_classifier."):
        name = "cls/seq_relationship/output_" + ("weights" if name.endswith("weight") else "bias")
    name = re.sub(r"LayerNorm(_1)?/weight$", r"LayerNorm\1/gamma", name)
    name = re.sub(r"LayerNorm(_1)?/bias$", r"LayerNorm\1/beta", name)
    name = re.sub(r"_embeddings/weight$", "_embeddings", name)
    return re.sub(r"/weight$", "/kernel", name)


@pytest.fixture(scope="module")
def hf_albert(tmp_path_factory):
    """A random `AlbertForPreTraining` (an `AlbertModel` with pooler, the
    `AlbertForMaskedLM` head and the sentence-order head) saved as a Hugging
    Face directory, and its outputs on `inputs()`."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**ALBERT))
    perturb(model, seed=3).eval()
    directory = tmp_path_factory.mktemp("hf_albert")
    model.save_pretrained(directory)
    token_ids, segment_ids = inputs()
    arguments = dict(
        input_ids=torch.tensor(token_ids, dtype=torch.long),
        token_type_ids=torch.tensor(segment_ids, dtype=torch.long),
        attention_mask=torch.tensor(token_ids != 0, dtype=torch.long),
    )
    with torch.no_grad():
        encoder = model.albert(**arguments)
        heads = model(**arguments)
    outputs = {
        "sequence_output": encoder.last_hidden_state.numpy(),
        "pooled_output": encoder.pooler_output.numpy(),
        "nsp_logits": heads.sop_logits.numpy(),
        "mlm_logits": heads.prediction_logits.numpy(),
    }
    return str(directory), outputs


@pytest.fixture(scope="module")
def tf_albert_dir(hf_albert, tmp_path_factory):
    """The same weights as Google's `albert_config.json` + `model.ckpt-*`."""
    from safetensors.numpy import load_file

    state = load_file(os.path.join(hf_albert[0], "model.safetensors"))
    arrays = {}
    for name, value in state.items():
        if "position_ids" in name or "decoder" in name:
            continue
        if name.endswith(".weight") and value.ndim == 2 and "embeddings" not in name and "sop" not in name:
            value = value.T  # torch.nn.Linear is (out, in)
        arrays[google_albert_name(name)] = np.ascontiguousarray(value)
    arrays["global_step"] = np.array(10, np.int64)
    directory = tmp_path_factory.mktemp("tf_albert")
    write_tf_checkpoint(str(directory / "model.ckpt-10"), arrays)
    config = dict(
        ALBERT, num_hidden_groups=1, inner_group_num=1, net_structure_type=0,
        gap_size=0, num_memory_blocks=0, down_scale_factor=1, layers_to_keep=[],
    )
    (directory / "albert_config.json").write_text(json.dumps(config))
    return str(directory)


def inputs():
    rng = np.random.default_rng(0)
    token_ids = rng.integers(5, ALBERT["vocab_size"], size=(2, 9)).astype("int32")
    token_ids[1, 6:] = 0  # padding
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 4:] = 1
    segment_ids[token_ids == 0] = 0
    return token_ids, segment_ids


@pytest.mark.parametrize("source", ["huggingface", "google"])
def test_outputs_equal_transformers_albert(source, hf_albert, tf_albert_dir):
    directory, expected = hf_albert
    if source == "huggingface":
        config, checkpoint = directory, directory
    else:
        config = os.path.join(tf_albert_dir, "albert_config.json")
        checkpoint = os.path.join(tf_albert_dir, "model.ckpt-10")
    token_ids, segment_ids = inputs()
    real = token_ids != 0
    batch = {"token_ids": token_ids, "segment_ids": segment_ids}

    # The config alone selects the variant. ALBERT's sentence-order head
    # loads as the two-way `NSP` head.
    encoder = keras_attn.build_transformer_model(config, checkpoint, with_nsp=True)
    assert isinstance(encoder.get_layer("Transformer-FeedForward"), keras_attn.layers.FeedForward)
    outputs = {key: to_numpy(value) for key, value in encoder(batch).items()}
    np.testing.assert_allclose(
        outputs["sequence_output"][real], expected["sequence_output"][real], atol=1e-4
    )
    for key in ("pooled_output", "nsp_logits"):
        np.testing.assert_allclose(outputs[key], expected[key], atol=1e-4, err_msg=key)

    mlm = keras_attn.build_transformer_model(config, checkpoint, application="mlm")
    np.testing.assert_allclose(
        to_numpy(mlm(batch))[real], expected["mlm_logits"][real], atol=1e-4
    )


def test_one_block_of_weights_serves_every_layer():
    config = dict(ALBERT, num_hidden_layers=2, initializer_range=0.3)
    albert = keras_attn.build_transformer_model(config, variant="albert")
    one_layer = keras_attn.build_transformer_model(
        dict(config, num_hidden_layers=1), variant="albert"
    )
    # Depth adds no weights: one block's variables, whatever num_hidden_layers.
    assert len(albert.weights) == len(one_layer.weights)

    # A BERT whose two blocks all hold the ALBERT block's weights computes
    # the same function: the shared block is applied at every layer.
    bert = keras_attn.build_transformer_model(config, variant="bert")
    shared = {w.path: to_numpy(w) for w in albert.weights}
    for weight in bert.weights:
        weight.assign(shared[re.sub(r"^Transformer-\d+-", "Transformer-", weight.path)])
    token_ids, segment_ids = inputs()
    batch = {"token_ids": token_ids, "segment_ids": segment_ids}
    expected = to_numpy(albert(batch))
    np.testing.assert_allclose(to_numpy(bert(batch)), expected, atol=1e-5)

    # Changing any one of BERT's copies changes its output, so ALBERT's
    # equality above needed the shared kernel at both layers.
    for index in range(2):
        kernel = bert.get_layer(f"Transformer-{index}-FeedForward").intermediate_dense.kernel
        original = to_numpy(kernel)
        kernel.assign(original * 1.5)
        assert np.abs(to_numpy(bert(batch)) - expected).max() > 1e-3, index
        kernel.assign(original)
    kernel = albert.get_layer("Transformer-FeedForward").intermediate_dense.kernel
    kernel.assign(to_numpy(kernel) * 1.5)
    assert np.abs(to_numpy(albert(batch)) - expected).max() > 1e-3


@pytest.mark.parametrize("field", ["num_hidden_groups", "inner_group_num"])
def test_grouped_albert_configs_are_refused(field, tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(dict(ALBERT, **{field: 2})))
    with pytest.raises(ValueError, match=f"`{field}=2`; this builder supports only `{field}=1`"):
        keras_attn.build_transformer_model(str(path))


def test_albert_configs_take_albert_weights_only(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(dict(ALBERT, num_hidden_groups=1)))
    with pytest.raises(ValueError, match="use variant='albert'"):
        keras_attn.build_transformer_model(str(path), variant="bert")
    model = keras_attn.build_transformer_model(dict(ALBERT, model_type="albert"))
    assert "Transformer-MultiHeadSelfAttention" in {layer.name for layer in model.layers}
    bert_path = tmp_path / "bert_config.json"
    bert_path.write_text(json.dumps(ALBERT))
    with pytest.raises(ValueError, match="use variant='roberta\\+'"):
        keras_attn.build_transformer_model(str(bert_path), variant="albert")


def test_sentencepiece_tokenizer_matches_albert_tokenizer_on_lowercased_text(tmp_path):
    """English ALBERTs: `SpTokenizer` on their SentencePiece model gives
    `AlbertTokenizer`'s ids once the text is lowercased (AlbertTokenizer
    lowercases itself; SpTokenizer leaves text as given), on text without
    accents or doubled quotes."""
    sentencepiece = pytest.importorskip("sentencepiece")
    transformers = pytest.importorskip("transformers")
    import inspect

    # AlbertTokenizer also rewrites `` and '' as " and strips accents.
    lines = [
        line
        for line in (inspect.getdoc(json) + inspect.getdoc(re)).splitlines()
        if line.strip() and line.isascii() and "''" not in line and "``" not in line
    ]
    prefix = tmp_path / "spm"
    # ALBERT's layout: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4.
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(line.lower() for line in lines), model_prefix=str(prefix),
        vocab_size=200, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2,
    )
    model_file = str(prefix) + ".model"
    ours = keras_attn.SpTokenizer(model_file)
    (tmp_path / "hf").mkdir()
    shutil.copy(model_file, tmp_path / "hf" / "spiece.model")
    theirs = transformers.AlbertTokenizer.from_pretrained(str(tmp_path / "hf"))
    checked = 0
    for first, second in zip(lines[::2], lines[1::2]):
        expected = theirs(first, second, return_token_type_ids=True)
        token_ids, segment_ids = ours.encode(first.lower(), second.lower())
        assert token_ids == expected["input_ids"], (first, second)
        assert segment_ids == expected["token_type_ids"]
        checked += first != first.lower()
    assert checked  # some lines had capitals: lowercasing was needed
    assert ours.encode("Json")[0] != theirs("Json")["input_ids"]


def test_layout_map_shards_the_shared_block():
    import keras

    devices = [f"cpu:{index}" for index in range(4)]
    mesh = keras.distribution.DeviceMesh((2, 2), ["batch", "model"], devices=devices)
    layout_map = keras_attn.get_layout_map(mesh)
    model = keras_attn.build_transformer_model(dict(ALBERT, model_type="albert"))
    axes = {
        variable.path: layout_map[variable.path].axes
        for variable in model.weights
        if layout_map[variable.path] is not None
    }
    assert axes == {
        "Transformer-MultiHeadSelfAttention/query_dense/kernel": (None, "model"),
        "Transformer-MultiHeadSelfAttention/query_dense/bias": ("model",),
        "Transformer-MultiHeadSelfAttention/key_dense/kernel": (None, "model"),
        "Transformer-MultiHeadSelfAttention/key_dense/bias": ("model",),
        "Transformer-MultiHeadSelfAttention/value_dense/kernel": (None, "model"),
        "Transformer-MultiHeadSelfAttention/value_dense/bias": ("model",),
        "Transformer-MultiHeadSelfAttention/output_dense/kernel": ("model", None),
        "Transformer-FeedForward/intermediate_dense/kernel": (None, "model"),
        "Transformer-FeedForward/intermediate_dense/bias": ("model",),
        "Transformer-FeedForward/output_dense/kernel": ("model", None),
    }
