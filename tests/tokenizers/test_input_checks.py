"""Hostile-but-fair inputs get errors that name the argument, the type or
value received and what is accepted, for both tokenizers alike."""

import keras
import numpy as np
import pytest

import keras_attn

LONG_TEXT = "the json module decodes documents and the parser reads arguments " * 3


@pytest.fixture(params=["wordpiece", "sentencepiece"])
def tokenizer(request, vocab_file, sentencepiece_model):
    if request.param == "wordpiece":
        return keras_attn.Tokenizer(vocab_file)
    return keras_attn.SpTokenizer(sentencepiece_model)


@pytest.mark.parametrize("maxlen", [0, 1])
def test_tokenize_maxlen_below_the_specials_names_the_minimum(tokenizer, maxlen):
    with pytest.raises(ValueError, match=rf"maxlen={maxlen} .*minimum is 2"):
        tokenizer.tokenize("the parser", maxlen=maxlen)
    with pytest.raises(ValueError, match=rf"maxlen={maxlen} .*minimum is 2"):
        tokenizer.encode("the parser", maxlen=maxlen)


def test_encode_pair_maxlen_below_the_specials_names_the_minimum(tokenizer):
    with pytest.raises(ValueError, match=r"maxlen=2 .*minimum is 3"):
        tokenizer.encode("the parser", "the json", maxlen=2)


def test_output_never_exceeds_maxlen(tokenizer):
    full = tokenizer.tokenize(LONG_TEXT)
    for maxlen in range(2, 12):
        tokens = tokenizer.tokenize(LONG_TEXT, maxlen=maxlen)
        assert tokens == full[: maxlen - 1] + full[-1:]
        token_ids, segment_ids = tokenizer.encode(LONG_TEXT, maxlen=maxlen)
        assert len(token_ids) == len(segment_ids) == maxlen
    for maxlen in range(3, 12):
        token_ids, segment_ids = tokenizer.encode(LONG_TEXT, LONG_TEXT, maxlen=maxlen)
        assert len(token_ids) == len(segment_ids) == maxlen
        assert token_ids.count(tokenizer.sep_id) == 2


def test_maxlen_without_specials(sentencepiece_model):
    bare = keras_attn.SpTokenizer(sentencepiece_model, cls_token="", sep_token="")
    with pytest.raises(ValueError, match=r"maxlen=0 .*minimum is 1"):
        bare.tokenize("the parser", maxlen=0)
    assert len(bare.tokenize(LONG_TEXT, maxlen=1)) == 1


@pytest.mark.parametrize("maxlen", [2.5, "8", True])
def test_maxlen_of_the_wrong_type(tokenizer, maxlen):
    with pytest.raises(TypeError, match=rf"maxlen \(or None\) must be an integer, got {type(maxlen).__name__}"):
        tokenizer.encode("the parser", maxlen=maxlen)
    assert len(tokenizer.encode(LONG_TEXT, maxlen=np.int64(5))[0]) == 5


@pytest.mark.parametrize(
    "text, type_name",
    [(b"the parser", "bytes"), (["the parser"], "list"), (None, "NoneType"), (3, "int")],
)
def test_texts_that_are_not_str(tokenizer, text, type_name):
    with pytest.raises(TypeError, match=rf"`first` must be a str, got {type_name}"):
        tokenizer.encode(text)
    if text is not None:  # second=None means a single text
        with pytest.raises(TypeError, match=rf"`second` must be a str, got {type_name}"):
            tokenizer.encode("the parser", text)
    with pytest.raises(TypeError, match=rf"`text` must be a str, got {type_name}"):
        tokenizer.tokenize(text)
    with pytest.raises(TypeError, match=rf"`text` must be a str, got {type_name}"):
        tokenizer.rematch(text)


@pytest.mark.parametrize("offset", [-1, 0, 7])
def test_decode_of_ids_out_of_range(tokenizer, offset):
    bad = -1 if offset == -1 else tokenizer.vocab_size + offset
    good = tokenizer.encode("the parser")[0]
    with pytest.raises(ValueError, match=rf"Token id {bad} .*{tokenizer.vocab_size} ids"):
        tokenizer.decode(good + [bad])
    with pytest.raises(ValueError, match=rf"Token id {bad} "):
        tokenizer.id_to_token(bad)
    # The last id in range, NumPy integers and backend tensors are accepted.
    tokenizer.id_to_token(tokenizer.vocab_size - 1)
    assert tokenizer.decode(np.array(good)) == tokenizer.decode(good)
    as_tensor = keras.ops.convert_to_tensor(np.array(good, dtype="int32"))
    assert tokenizer.decode(as_tensor) == tokenizer.decode(good)
    with pytest.raises(ValueError, match=rf"Token id {bad} "):
        tokenizer.decode(keras.ops.convert_to_tensor(np.array(good + [bad], dtype="int32")))


def test_decode_of_ids_that_are_not_integers(tokenizer):
    with pytest.raises(TypeError, match=r"A token id must be an integer, got float: 1.5"):
        tokenizer.decode([tokenizer.cls_id, 1.5])
    with pytest.raises(TypeError, match=r"A token id must be an integer, got str"):
        tokenizer.id_to_token("3")


def test_bad_vocabulary_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.txt.*does not exist"):
        keras_attn.Tokenizer(str(tmp_path / "nowhere.txt"))
    with pytest.raises(FileNotFoundError, match="is not a file"):
        keras_attn.Tokenizer(str(tmp_path))
    with pytest.raises(TypeError, match="Vocabulary file path must be a str or os.PathLike, got NoneType"):
        keras_attn.Tokenizer(None)
    empty = tmp_path / "vocab.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"vocab.txt.*empty \(0 bytes\)"):
        keras_attn.Tokenizer(empty)


def test_bad_sentencepiece_files_are_named(tmp_path, sentencepiece_model):
    empty = tmp_path / "empty.model"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.model.*empty \(0 bytes\)"):
        keras_attn.SpTokenizer(str(empty))
    text = tmp_path / "vocab.model"
    text.write_text("[PAD]\n[UNK]\nhello\n")
    with pytest.raises(ValueError, match=r"vocab.model.*could not be read as a SentencePiece"):
        keras_attn.SpTokenizer(str(text))
    truncated = tmp_path / "truncated.model"
    truncated.write_bytes(open(sentencepiece_model, "rb").read()[:100])
    with pytest.raises(ValueError, match=r"truncated.model"):
        keras_attn.SpTokenizer(str(truncated))
    with pytest.raises(TypeError, match="SentencePiece model path must be a str or os.PathLike, got NoneType"):
        keras_attn.SpTokenizer(None)
