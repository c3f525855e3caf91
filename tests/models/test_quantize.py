"""`model.quantize("int8")` (Keras' quantizers) on every registered variant:
the custom layers are quantized (token embedding with its tied masked-LM
head, attention and feed-forward projections), talking-heads mixing stays in
float, outputs stay close to float, and `.keras` files reload. That the
cached generation loop decodes the quantized weights as the full pass does
is checked by tests/generation/test_one_forward_pass.py (BERT, after LoRA
and its merge) and test_new_family_adapters.py (GPT-2, T5)."""

import warnings

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers import TokenEmbedding
from tests.harness import to_numpy
from tests.models.test_variants import REGISTERED
from tests.models.test_variants import build
from tests.models.test_variants import inputs_for

# Int8 with one scale per output channel: errors of a fraction of a percent
# per weight, a few percent of the output's scale after a layer. A reverse
# projection that forgot the table's scales is off by a factor of ~100.
RELATIVE_TOLERANCE = 0.05

# Each variant once, with the tied masked-LM head where it has one.
CASES = [
    (variant, "mlm" if "mlm" in cls.applications else cls.applications[0])
    for variant, cls in REGISTERED.items()
]
# `.keras` round trips of the distinct layer classes: plain attention,
# decoupled widths, talking heads, T-TA, a position-bias variant.
SAVED = ("bert", "roberta+", "talking_heads", "tta", "alibi")


def quantize(model):
    # Keras warns once per layer it leaves in float (norms, dropout, ...).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.quantize("int8")


def test_quantize_collects_garbage_once(monkeypatch):
    """Keras runs a full garbage collection per float kernel it replaces
    (seconds each in a process holding many objects);
    `TransformerModel.quantize` runs one at the end."""
    import gc

    calls = []
    monkeypatch.setattr(gc, "collect", lambda *args: calls.append(args) or 0)
    model = build("bert", "encoder")
    quantize(model)
    assert model.get_layer("Transformer-0-FeedForward").intermediate_dense.quantization_mode == "int8"
    assert len(calls) == 1
    # Keras' own quantize of the same model collects once per kernel.
    calls.clear()
    keras.Model.quantize(build("bert", "encoder"), "int8")
    assert len(calls) > 1


def relative_error(actual, expected):
    return np.abs(actual - expected).max() / np.abs(expected).max()


@pytest.mark.parametrize("variant, application", CASES)
def test_int8_quantization(variant, application, tmp_path):
    # Large weights, so that the outputs depend on every layer.
    model = build(variant, application, initializer_range=0.2)
    inputs = inputs_for(model)
    expected = to_numpy(model(inputs))

    quantize(model)

    token = model.get_layer("Embedding-Token")
    assert token.quantization_mode == "int8"
    assert keras.backend.standardize_dtype(token._embeddings.dtype) == "int8"
    # The first block's (ALBERT's one shared block has unindexed names,
    # T5's are `Encoder-Transformer-0-...`).
    attention = next(l for l in model.layers if isinstance(l, keras_attn.MultiHeadAttention))
    denses = [getattr(attention, name) for name in attention.dense_projections]
    feed_forward = next((l for l in model.layers if l.name.endswith("-FeedForward")), None)
    if feed_forward is not None:  # GAU-alpha's blocks have no feed-forward
        denses += [feed_forward.intermediate_dense, feed_forward.output_dense]
    for dense in denses:
        assert dense.quantization_mode == "int8", dense.path
    if isinstance(attention, keras_attn.TalkingHeadsAttention):
        for kernel in (attention.pre_softmax_kernel, attention.post_softmax_kernel):
            assert keras.backend.standardize_dtype(kernel.dtype) == "float32"

    quantized = to_numpy(model(inputs))
    assert np.all(np.isfinite(quantized))
    assert 0 < relative_error(quantized, expected) < RELATIVE_TOLERANCE

    if variant not in SAVED:
        return
    path = str(tmp_path / "int8.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.get_layer("Embedding-Token").quantization_mode == "int8"
    np.testing.assert_allclose(to_numpy(loaded(inputs)), quantized, atol=1e-6)


def test_tied_head_uses_the_dequantized_table(monkeypatch):
    """The closeness check above catches a reverse projection that reads the
    int8 table without its scales (what `TokenEmbedding.call` computes on a
    quantized layer, whose `embeddings` are the raw int8 values)."""
    model = build("bert", "mlm", initializer_range=0.2)
    inputs = inputs_for(model)
    expected = to_numpy(model(inputs))
    quantize(model)
    assert relative_error(to_numpy(model(inputs)), expected) < RELATIVE_TOLERANCE

    lookup = TokenEmbedding._int8_call

    def unscaled(layer, inputs, reverse=False, training=None):
        if not reverse:
            return lookup(layer, inputs)
        table = keras.ops.cast(layer._embeddings, inputs.dtype)
        return keras.ops.matmul(inputs, keras.ops.transpose(table))

    monkeypatch.setattr(TokenEmbedding, "_int8_call", unscaled)
    assert relative_error(to_numpy(model(inputs)), expected) > RELATIVE_TOLERANCE

    # An independent reference for the reverse projection: hidden times the
    # dequantized table, `E_int8 / scale`.
    monkeypatch.undo()
    token = model.get_layer("Embedding-Token")
    hidden = np.random.default_rng(0).normal(size=(2, 3, 16)).astype("float32")
    table = to_numpy(token._embeddings).astype("float32") / to_numpy(token.embeddings_scale)[:, None]
    np.testing.assert_allclose(to_numpy(token(hidden, reverse=True)), hidden @ table.T, rtol=1e-5, atol=1e-5)
    ids = np.array([[1, 5, 29]], "int32")
    np.testing.assert_allclose(to_numpy(token(ids)), table[ids], rtol=1e-6)


def test_other_modes_leave_the_token_embedding_in_float():
    token = TokenEmbedding(30, 8)
    token.build()
    with pytest.raises(NotImplementedError, match="supports quantization mode 'int8'.*'int4'"):
        token.quantize("int4")
