"""T5Tokenizer against transformers' T5TokenizerFast on a SentencePiece
unigram model with T5's special ids, trained here on standard-library
docstrings."""

import numpy as np
import pytest

import keras_attn
from tests.tokenizers.conftest import PARITY_TEXTS

SENTINEL_TEXTS = [
    "The <extra_id_0> walks in <extra_id_1> park",
    "a<extra_id_3>b",
    "a <extra_id_3>  b <extra_id_3>",
    "<extra_id_0><extra_id_1><extra_id_99>",
    "  <extra_id_6>  leading and trailing  <extra_id_5>  ",
    "<extra_id_100> and <extra_id_-1> and <extra_id_ 3> are text",
    "<<extra_id_1>> <extra_id_1>0> <extra_id_10>",
    "typed specials: x </s> y <pad><unk> z",
    "中文<extra_id_2>emoji 😀<extra_id_4>\ttab",
]
# SentencePiece and T5TokenizerFast treat these differently unless
# T5Tokenizer maps them: U+0085 survives SentencePiece's normalisation but
# is whitespace to the `tokenizers` package.
WHITESPACE_TEXTS = [
    "next\x85line",
    "\u2028line\u2029para\u1680ogham\u202fnarrow\u205fmath\u3000ideographic\x0bvt\x0cff",
    "\x1c\x1d\x1e\x1f separators",
]
TEXTS = PARITY_TEXTS + SENTINEL_TEXTS + WHITESPACE_TEXTS


def train(directory, corpus, **arguments):
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_prefix=str(directory / "spiece"),
        character_coverage=1.0,
        minloglevel=2,
        **arguments,
    )
    return directory / "spiece.model"


@pytest.fixture(scope="module")
def t5_model(tmp_path_factory, corpus):
    """A 400-piece unigram model with T5's ids: <pad> 0, </s> 1, <unk> 2, no
    <s>, saved as `spiece.model` as in T5's checkpoints."""
    directory = tmp_path_factory.mktemp("t5")
    return train(directory, corpus, vocab_size=400, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)


@pytest.fixture(scope="module", params=[100, 7], ids=["extra_ids=100", "extra_ids=7"])
def tokenizers_pair(request, t5_model):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("google.protobuf")  # transformers reads the model with it
    # from_pretrained converts spiece.model in transformers 4 and 5 alike
    # (transformers 5's constructor ignores `vocab_file`).
    reference = transformers.T5TokenizerFast.from_pretrained(str(t5_model.parent), extra_ids=request.param)
    ours = keras_attn.T5Tokenizer(t5_model, extra_ids=request.param)
    assert ours.vocab_size == len(reference) == 400 + request.param
    return ours, reference


def test_ids_equal_t5_tokenizer_fast(tokenizers_pair, corpus):
    ours, reference = tokenizers_pair
    for text in TEXTS + corpus[:300]:
        token_ids, segment_ids = ours.encode(text)
        assert token_ids == reference(text)["input_ids"], text
        assert token_ids[-1] == ours.end_id
        assert segment_ids == [0] * len(token_ids)


def test_sentinels_follow_the_model_in_reverse(tokenizers_pair):
    ours, reference = tokenizers_pair
    extra_ids = ours.extra_ids
    sentinels = [f"<extra_id_{i}>" for i in range(extra_ids)]
    assert ours.tokens_to_ids(sentinels) == reference.convert_tokens_to_ids(sentinels)
    assert ours.token_to_id("<extra_id_0>") == ours.vocab_size - 1 == 400 + extra_ids - 1
    assert ours.token_to_id(f"<extra_id_{extra_ids - 1}>") == 400
    assert ours.ids_to_tokens(range(400, ours.vocab_size)) == sentinels[::-1]
    # One past the last sentinel is text, as in T5TokenizerFast.
    assert ours.token_to_id(f"<extra_id_{extra_ids}>") == ours.unk_id
    assert ours.tokenize(f"<extra_id_{extra_ids}>")[-2:] == [">", "</s>"]


def test_pairs_equal_t5_tokenizer_fast(tokenizers_pair, corpus):
    ours, reference = tokenizers_pair
    for first, second in zip(corpus[:30] + SENTINEL_TEXTS, corpus[30:60] + SENTINEL_TEXTS[::-1]):
        token_ids, segment_ids = ours.encode(first, second)
        assert token_ids == reference(first, second)["input_ids"]
        first_length = len(ours.encode(first)[0])
        assert segment_ids == [0] * first_length + [1] * (len(token_ids) - first_length)


def test_decode_equals_t5_tokenizer_fast(tokenizers_pair, corpus):
    ours, reference = tokenizers_pair
    for text in TEXTS + corpus[:100]:
        token_ids = ours.encode(text)[0]
        with_padding = token_ids + [ours.pad_id] * 2
        assert ours.decode(with_padding, skip_special_tokens=False) == reference.decode(
            with_padding, skip_special_tokens=False
        ), text
        if "<extra_id_" not in text:  # T5TokenizerFast would drop the sentinels
            assert ours.decode(with_padding) == reference.decode(with_padding, skip_special_tokens=True), text
    # Sentinels are kept; the space before one is not (SentencePiece drops
    # it from the text before), as in T5TokenizerFast.decode.
    token_ids = ours.encode("The <extra_id_0> walks in <extra_id_1> park")[0]
    assert ours.decode(token_ids) == "The<extra_id_0> walks in<extra_id_1> park"
    assert ours.decode(np.array(token_ids)) == ours.decode(token_ids)


def test_special_ids(t5_model):
    tokenizer = keras_attn.T5Tokenizer(t5_model)
    assert (tokenizer.pad_id, tokenizer.end_id, tokenizer.unk_id) == (0, 1, 2)
    assert tokenizer.sep_id == tokenizer.end_id
    assert tokenizer.ids_to_tokens([0, 1, 2]) == ["<pad>", "</s>", "<unk>"]
    for name in ("cls_id", "mask_id"):
        with pytest.raises(ValueError, match="has no"):
            getattr(tokenizer, name)
    assert tokenizer.encode("")[0] == [tokenizer.end_id]
    assert keras_attn.tokenizers.T5Tokenizer is keras_attn.T5Tokenizer


def test_truncation_keeps_the_end_token(t5_model, corpus):
    tokenizer = keras_attn.T5Tokenizer(t5_model)
    text = corpus[0] + " " + corpus[1]
    full = tokenizer.encode(text)[0]
    assert tokenizer.encode(text, maxlen=5)[0] == full[:4] + [tokenizer.end_id]
    token_ids, segment_ids = tokenizer.encode(text, "the parser", maxlen=12)
    assert len(token_ids) == len(segment_ids) == 12
    assert token_ids.count(tokenizer.end_id) == 2 and token_ids[-1] == tokenizer.end_id
    with pytest.raises(ValueError, match=r"maxlen=1 .*minimum is 2"):
        tokenizer.encode(text, "the parser", maxlen=1)


def test_rematch_gives_sentinels_their_characters(t5_model):
    tokenizer = keras_attn.T5Tokenizer(t5_model)
    text = "a <extra_id_3> json\x85parser"
    tokens = tokenizer.tokenize(text)
    mapping = tokenizer.rematch(text)
    assert len(mapping) == len(tokens) and mapping[-1] == []
    position = tokens.index("<extra_id_3>")
    assert mapping[position] == list(range(2, 14))
    for token, indices in zip(tokens[:-1], mapping[:-1]):
        assert "".join(text[i] for i in indices).strip() == token.replace("\u2581", " ").strip()


def test_bad_models_are_named(t5_model, tmp_path, corpus):
    with pytest.raises(FileNotFoundError, match=r"SentencePiece model .*missing.model' does not exist"):
        keras_attn.T5Tokenizer(tmp_path / "missing.model")
    text = tmp_path / "vocab.model"
    text.write_text("<pad>\n</s>\n<unk>\n")
    with pytest.raises(ValueError, match=r"vocab.model.*could not be read as a SentencePiece"):
        keras_attn.T5Tokenizer(text)
    no_eos = tmp_path / "no_eos"
    no_eos.mkdir()
    model = train(no_eos, corpus[:300], vocab_size=100, pad_id=0, eos_id=-1, unk_id=1, bos_id=-1)
    with pytest.raises(ValueError, match=r"no_eos/spiece.model' has no end-of-sequence \(eos\) piece"):
        keras_attn.T5Tokenizer(model)
    own = tmp_path / "own_sentinels"
    own.mkdir()
    model = train(
        own, corpus[:300], vocab_size=100, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        user_defined_symbols=["<extra_id_0>"],
    )
    with pytest.raises(ValueError, match=r"own_sentinels/spiece.model' already has the piece '<extra_id_0>' \(id 3\)"):
        keras_attn.T5Tokenizer(model)
    assert keras_attn.T5Tokenizer(model, extra_ids=0).vocab_size == 100
    with pytest.raises(ValueError, match="extra_ids must be at least 0, got -1"):
        keras_attn.T5Tokenizer(t5_model, extra_ids=-1)
    with pytest.raises(TypeError, match="extra_ids must be an integer, got float"):
        keras_attn.T5Tokenizer(t5_model, extra_ids=1.5)
