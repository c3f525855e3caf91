"""Exported builder models reproduce the Keras outputs on tokenized text.

Keras' export API on the three variants the issue names (BERT, RoBERTa+
with a decoupled key width, a windowed RoPE model) and LLaMA (grouped-query
attention, a causal mask, token ids alone), reloaded with the
format's own runtime (`tf.saved_model.load`, onnxruntime) and compared with
the Keras model on WordPiece-tokenized sentences of different lengths,
padded into one batch."""

import inspect
import textwrap

import keras
import numpy as np
import pytest

import keras_attn

# Tiny models; the window of "roformer" is shorter than the sentences, so
# the banded attention path is the one exported.
VARIANTS = {
    "bert": dict(variant="bert"),
    "roberta+": dict(variant="roberta+", attention_key_size=4),
    "roformer": dict(variant="roformer", attention_window=3),
    # One key/value head under two query heads.
    "llama": dict(variant="llama", num_key_value_heads=1),
}
SENTENCES = [
    ("Wrap a single paragraph of text.", None),
    ("Remove any common leading whitespace from every line.", "Fill a paragraph."),
    ("Indent lines.", None),
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A WordPiece vocabulary of < 100 tokens trained on textwrap's docstrings."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    lines = [
        line
        for _, member in inspect.getmembers(textwrap)
        for line in (inspect.getdoc(member) or "").splitlines()
        if line.strip()
    ]
    trainer = trainers.WordPieceTrainer(
        vocab_size=90, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    trained = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    trained.normalizer = normalizers.BertNormalizer(lowercase=True)
    trained.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trained.train_from_iterator(lines, trainer)
    vocabulary = trained.get_vocab()
    path = tmp_path_factory.mktemp("export_vocab") / "vocab.txt"
    path.write_text("\n".join(sorted(vocabulary, key=vocabulary.get)) + "\n", encoding="utf-8")
    return keras_attn.Tokenizer(str(path))


@pytest.fixture(scope="module")
def batch(tokenizer):
    """`SENTENCES` tokenized and right-padded with [PAD] (id 0) to one length."""
    encoded = [tokenizer.encode(first, second) for first, second in SENTENCES]
    length = max(len(ids) for ids, _ in encoded)
    assert min(len(ids) for ids, _ in encoded) < length  # padding is exercised
    token_ids = np.zeros((len(encoded), length), "int32")
    segment_ids = np.zeros((len(encoded), length), "int32")
    for row, (ids, segments) in enumerate(encoded):
        token_ids[row, : len(ids)] = ids
        segment_ids[row, : len(segments)] = segments
    return {"token_ids": token_ids, "segment_ids": segment_ids}


def build(variant, tokenizer):
    options = dict(VARIANTS[variant])
    config = dict(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        type_vocab_size=2,
    )
    if variant == "llama":
        config["type_vocab_size"] = 0
        config["num_key_value_heads"] = options.pop("num_key_value_heads")
    return keras_attn.build_transformer_model(config, variant=options.pop("variant"), **options)


def inputs_of(model, batch):
    """The batch's inputs that `model` takes (LLaMA: token ids alone)."""
    return {name: batch[name] for name in model.input_contract.names}


def _missing(module):
    import importlib.util

    return importlib.util.find_spec(module) is None


@pytest.mark.skipif(
    keras.config.backend() == "torch" and _missing("torch_xla"),
    reason="Keras exports a SavedModel from torch through torch_xla (not installed; "
    "no release for torch 2.13).",
)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_tf_saved_model_reproduces_keras(variant, tokenizer, batch, tmp_path):
    import tensorflow as tf

    model = build(variant, tokenizer)
    path = str(tmp_path / "exported")
    model.export(path, format="tf_saved_model", verbose=False)
    reloaded = tf.saved_model.load(path)

    _, signature = reloaded.signatures["serving_default"].structured_input_signature
    batch = inputs_of(model, batch)
    assert sorted(signature) == sorted(batch)
    assert all(spec.shape.as_list() == [None, None] for spec in signature.values())
    checked = [batch]
    if variant == "roformer":
        # A shorter batch too: the exported length is free, and the banded
        # path's number of blocks follows it.
        checked.append({name: value[:1, :9] for name, value in batch.items()})
    for inputs in checked:
        expected = keras.ops.convert_to_numpy(model(inputs))
        exported = reloaded.serve(inputs).numpy()
        np.testing.assert_allclose(exported, expected, atol=1e-4, rtol=0)


@pytest.mark.skipif(
    keras.config.backend() == "torch" and _missing("torch_xla"),
    reason="Keras exports a SavedModel from torch through torch_xla.",
)
def test_model_with_a_condition_input_exports(tokenizer, batch, tmp_path):
    """A `conditional_layer_norm` model: its float `condition` input is
    `(batch, width)`, not `(batch, length)`."""
    import tensorflow as tf

    model = keras_attn.build_transformer_model(
        dict(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
             num_attention_heads=2, intermediate_size=32, max_position_embeddings=64),
        conditional_layer_norm=3,
    )
    for variable in model.weights:
        if variable.path.endswith(("gamma_kernel", "beta_kernel")):  # the condition matters
            variable.assign(np.full(variable.shape, 0.3, "float32"))
    inputs = dict(batch, condition=np.arange(9, dtype="float32").reshape(3, 3) / 9)
    path = str(tmp_path / "exported")
    model.export(path, format="tf_saved_model", verbose=False)
    reloaded = tf.saved_model.load(path)
    exported = reloaded.serve(inputs).numpy()
    np.testing.assert_allclose(exported, keras.ops.convert_to_numpy(model(inputs)), atol=1e-4)
    other = reloaded.serve(dict(inputs, condition=inputs["condition"][::-1])).numpy()
    assert np.abs(other - exported).max() > 1e-3


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_onnx_reproduces_keras(variant, tokenizer, batch, tmp_path):
    backend = keras.config.backend()
    if backend == "tensorflow":
        pytest.skip(
            "Keras converts TensorFlow models with tf2onnx, whose 1.17 release "
            "cannot convert TensorFlow 2.21's GELU (op Erfc) nor these models' "
            "dynamic reshapes (onnxruntime rejects the graph)."
        )
    if backend == "jax":
        pytest.importorskip("jax2onnx", reason="Keras exports ONNX from JAX with jax2onnx.")
    ort = pytest.importorskip("onnxruntime", reason='pip install "keras_attn[export]"')
    if backend == "torch":
        pytest.importorskip("onnxscript", reason='pip install "keras_attn[export]"')

    model = build(variant, tokenizer)
    batch = inputs_of(model, batch)
    path = str(tmp_path / "model.onnx")
    signature = None
    if backend == "torch":
        # Keras' torch exporter with free dimensions fails on
        # LayerNormalization (keras.ops.layer_norm under TorchScript), so
        # the shapes are fixed at the batch's.
        signature = [
            {
                name: keras.InputSpec(shape=value.shape, dtype="int32", name=name)
                for name, value in batch.items()
            }
        ]
    model.export(path, format="onnx", verbose=False, input_signature=signature)
    session = ort.InferenceSession(path)
    assert sorted(node.name for node in session.get_inputs()) == sorted(batch)
    exported = session.run(None, {node.name: batch[node.name] for node in session.get_inputs()})[0]
    expected = keras.ops.convert_to_numpy(model(batch))
    np.testing.assert_allclose(exported, expected, atol=1e-4, rtol=0)
