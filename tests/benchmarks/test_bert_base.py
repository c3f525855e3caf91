"""benchmarks/bert_base.py's contender for issue 30's item 5: keras_attn's
BERT with its attention forced onto the einsum path, as keras-hub computes
attention, equal to the default model's output."""

import os
import sys

import keras
import numpy as np

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCHMARKS))

import bert_base  # noqa: E402

from keras_attn.layers import dot_product_attention  # noqa: E402

TINY = dict(
    vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
)


def test_the_einsum_contender_never_calls_the_fused_kernel(monkeypatch):
    monkeypatch.setattr(bert_base, "CONFIG", TINY)
    keras.utils.set_random_seed(0)
    fused_model = bert_base.keras_attn.build_transformer_model(TINY, dropout_rate=0.1)
    tokens = np.array([[5, 9, 11, 0], [7, 3, 0, 0]], "int32")
    inputs = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}
    expected = keras.ops.convert_to_numpy(fused_model(inputs))

    built = []
    monkeypatch.setattr(
        bert_base.keras_attn, "build_transformer_model",
        lambda config, **kwargs: built.append(fused_model) or fused_model,
    )
    calls = []
    original = dot_product_attention.fused_attention
    monkeypatch.setattr(
        dot_product_attention, "fused_attention",
        lambda *args: calls.append(1) or original(*args),
    )
    fused_model(inputs)
    assert calls, "the default model was expected to take the fused kernel"
    calls.clear()
    bert_base.ours_einsum_attention()
    einsum = keras.ops.convert_to_numpy(built[0](inputs))
    assert not calls
    np.testing.assert_allclose(einsum, expected, atol=1e-5)
