import unicodedata

import pytest

import keras_attn


def test_encode_decode_round_trip(sentencepiece_model, corpus):
    tokenizer = keras_attn.SpTokenizer(sentencepiece_model)
    for text in corpus[:100]:
        token_ids, segment_ids = tokenizer.encode(text)
        assert token_ids[0] == tokenizer.cls_id and token_ids[-1] == tokenizer.sep_id
        assert segment_ids == [0] * len(token_ids)
        assert tokenizer.decode(token_ids) == " ".join(text.split())


def test_pairs_and_truncation(sentencepiece_model):
    tokenizer = keras_attn.SpTokenizer(sentencepiece_model)
    first = "Return a new dictionary initialized from an optional positional argument"
    second = "the parser"
    second_length = len(tokenizer.tokenize(second)) - 2
    # Room for the whole second text and a longer part of the first.
    maxlen = 3 + 2 * second_length + 1
    token_ids, segment_ids = tokenizer.encode(first, second, maxlen=maxlen)
    assert len(token_ids) == maxlen
    assert token_ids.count(tokenizer.sep_id) == 2
    assert segment_ids.count(1) == second_length + 1
    assert segment_ids.count(0) == 1 + second_length + 1 + 1


def test_rematch_gives_character_spans(sentencepiece_model):
    tokenizer = keras_attn.SpTokenizer(sentencepiece_model)
    text = "Héllo wörld, 中文 text"
    tokens = tokenizer.tokenize(text)
    mapping = tokenizer.rematch(text, tokens)
    assert mapping[0] == [] and mapping[-1] == []
    for token, indices in zip(tokens[1:-1], mapping[1:-1]):
        piece = token.replace("\u2581", " ")
        if token != tokenizer.id_to_token(tokenizer.unk_id):
            assert "".join(text[i] for i in indices).strip() == piece.strip(), (token, indices)


def test_special_tokens(sentencepiece_model):
    tokenizer = keras_attn.SpTokenizer(sentencepiece_model)
    assert tokenizer.id_to_token(tokenizer.pad_id) == "<pad>"
    assert tokenizer.id_to_token(tokenizer.cls_id) == "<s>"
    with pytest.raises(ValueError, match="mask"):
        tokenizer.mask_id
    with pytest.raises(ValueError, match="<nope>"):
        keras_attn.SpTokenizer(sentencepiece_model, mask_token="<nope>")
    bare = keras_attn.SpTokenizer(sentencepiece_model, cls_token="", sep_token="")
    assert bare.encode("the")[0] == bare.tokens_to_ids(bare.tokenize("the"))
    assert tokenizer.encode("the")[0][1:-1] == bare.encode("the")[0]


def test_none_means_no_special_token_as_in_bert4keras(sentencepiece_model):
    """Issue 34, item 17: bert4keras's `SpTokenizer(path, token_start=None,
    token_end=None)` was a TypeError, and `cls_token=None` silently meant
    the model's default. None is no token under both names; left out, the
    model's own."""
    default = keras_attn.SpTokenizer(sentencepiece_model)
    expected = default.encode("the json module")[0][1:-1]
    for bare in (
        keras_attn.SpTokenizer(sentencepiece_model, token_start=None, token_end=None),
        keras_attn.SpTokenizer(sentencepiece_model, cls_token=None, sep_token=None),
    ):
        assert bare.encode("the json module")[0] == expected
        with pytest.raises(ValueError, match="start"):
            bare.cls_id
    start = keras_attn.SpTokenizer(sentencepiece_model, token_start="<s>", token_end=None)
    assert start.encode("the json module")[0] == [default.cls_id] + expected
    with pytest.raises(ValueError, match="mask"):
        keras_attn.SpTokenizer(sentencepiece_model, mask_token=None).mask_id
    with pytest.raises(TypeError, match="`sep_token` or bert4keras's `token_end`"):
        keras_attn.SpTokenizer(sentencepiece_model, sep_token="</s>", token_end="</s>")


def test_missing_model_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.model"):
        keras_attn.SpTokenizer(str(tmp_path / "missing.model"))


@pytest.mark.parametrize(
    "text", ["cafe\u0301", "cafe\u0301s naı\u0308ve", "e\u0301\u0301te\u0301", "x cafe\u0301\u0301"]
)
def test_rematch_keeps_combining_accents_with_their_letter(sentencepiece_model, text):
    tokenizer = keras_attn.SpTokenizer(sentencepiece_model)
    mapping = tokenizer.rematch(text)
    owner = {i: position for position, indices in enumerate(mapping) for i in indices}
    for index, character in enumerate(text):
        assert character.isspace() or index in owner, (text, index)
        token_characters = [text[i] for i in mapping[owner.get(index, 0)]]
        # A mark SentencePiece keeps as a piece of its own is its own token;
        # any other mark shares the token of the letter it combines with.
        if unicodedata.category(character) == "Mn" and not all(
            unicodedata.category(c) == "Mn" for c in token_characters
        ):
            base = index - 1
            while unicodedata.category(text[base]) == "Mn":
                base -= 1
            assert owner[index] == owner[base], (text, index)
