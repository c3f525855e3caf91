"""`SpTokenizer`'s bert4keras hooks, `pre_tokenize` and `token_translate`
(as CPM-LM's tokenizer uses them), on a character-level SentencePiece model
trained here, whose pieces can be written down by hand: one per character,
`\u2581` where a word starts."""

import io

import pytest

import keras_attn

NEWLINE_STAND_IN = "\u2583"  # what CPM-LM's pre_tokenize writes for "\n"


@pytest.fixture(scope="module")
def character_model(tmp_path_factory):
    """A character model of the letters a-d, with `<cls>` as a user-defined
    symbol and pad/unk/bos/eos 0-3; it has no piece for the stand-in."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["abcd dcba", "ab cd", "bad cab"] * 10),
        model_writer=model, vocab_size=100, model_type="char",
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, user_defined_symbols=["<cls>"],
        character_coverage=1.0, hard_vocab_limit=False, minloglevel=2,
    )
    path = tmp_path_factory.mktemp("character_sentencepiece") / "char.model"
    path.write_bytes(model.getvalue())
    processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())}
    assert pieces == {"<pad>", "<unk>", "<s>", "</s>", "<cls>", "a", "b", "c", "d", "\u2581"}
    return str(path), processor


def ids(processor, pieces):
    """The ids SentencePiece itself gives `pieces` (the reference)."""
    return [processor.piece_to_id(piece) for piece in pieces]


def test_sentencepiece_encodes_the_pre_tokenized_words_joined_by_spaces(character_model):
    path, processor = character_model
    seen = []

    def pre_tokenize(text):
        seen.append(text)
        return text.split("-")

    tokenizer = keras_attn.SpTokenizer(path, pre_tokenize=pre_tokenize)
    # "ab-cd" -> ["ab", "cd"] -> SentencePiece sees "ab cd".
    tokens = tokenizer.tokenize("ab-cd")
    assert seen == ["ab-cd"]
    assert tokens == ["<s>", "\u2581", "a", "b", "\u2581", "c", "d", "</s>"]
    token_ids, segment_ids = tokenizer.encode("ab-cd", "d-a")
    assert token_ids == ids(
        processor, ["<s>", "\u2581", "a", "b", "\u2581", "c", "d", "</s>", "\u2581", "d", "\u2581", "a", "</s>"]
    )
    assert segment_ids == [0] * 8 + [1] * 5
    # Without the hook the hyphen is text: a character the model has no piece for.
    plain = keras_attn.SpTokenizer(path)
    assert plain.tokenize("ab-cd") == ["<s>", "\u2581", "a", "b", "-", "c", "d", "</s>"]
    assert plain.encode("ab-cd")[0][4] == processor.unk_id()
    # decode returns the text SentencePiece saw.
    assert tokenizer.decode(token_ids) == "ab cd d a"


def test_translated_tokens_encode_as_their_target_and_decode_back(character_model):
    """CPM-LM: newlines become the stand-in before SentencePiece, which has
    no piece for it; the stand-in is encoded as `<cls>` and decoded back."""
    path, processor = character_model
    tokenizer = keras_attn.SpTokenizer(
        path, cls_token="", sep_token="",
        pre_tokenize=lambda text: [text.replace("\n", NEWLINE_STAND_IN)],
        token_translate={NEWLINE_STAND_IN: "<cls>"},
    )
    tokens = tokenizer.tokenize("ab\ncd")
    assert tokens == ["\u2581", "a", "b", "<cls>", "c", "d"]
    token_ids, _ = tokenizer.encode("ab\ncd")
    assert token_ids == ids(processor, tokens)
    assert processor.piece_to_id("<cls>") != processor.unk_id()
    assert tokenizer.decode(token_ids) == "ab" + NEWLINE_STAND_IN + "cd"
    # Untranslated, the stand-in is an unknown piece, left out of decode.
    plain = keras_attn.SpTokenizer(path, cls_token="", sep_token="")
    assert plain.encode("ab" + NEWLINE_STAND_IN + "cd")[0][3] == processor.unk_id()
    assert plain.decode(plain.encode("ab" + NEWLINE_STAND_IN + "cd")[0]) == "abcd"


def test_translation_of_a_piece_round_trips_and_targets_are_translated_back_first(character_model):
    path, processor = character_model
    tokenizer = keras_attn.SpTokenizer(path, token_translate={"b": "<cls>"})
    token_ids, _ = tokenizer.encode("abc ba")
    expected = ["<s>", "\u2581", "a", "<cls>", "c", "\u2581", "<cls>", "a", "</s>"]
    assert token_ids == ids(processor, expected)
    assert tokenizer.decode(token_ids) == "abc ba"
    # A special token as the target (as bert4keras, the inverse translation
    # comes first): the end token added by encode is written back too.
    to_special = keras_attn.SpTokenizer(path, token_translate={"b": "</s>"})
    token_ids, _ = to_special.encode("ab")
    assert token_ids == ids(processor, ["<s>", "\u2581", "a", "</s>", "</s>"])
    assert to_special.decode(token_ids) == "abb"
    # rematch follows the translated tokens (same characters, new token).
    assert tokenizer.rematch("abc ba") == [[], [], [0], [1], [2], [3], [4], [5], []]


def test_hook_arguments_are_checked(character_model):
    path, _ = character_model
    with pytest.raises(ValueError, match="'<nope>'"):
        keras_attn.SpTokenizer(path, token_translate={"a": "<nope>"})
    with pytest.raises(ValueError, match="both 'a' and 'b'"):
        keras_attn.SpTokenizer(path, token_translate={"a": "<cls>", "b": "<cls>"})
    with pytest.raises(TypeError, match="token_translate"):
        keras_attn.SpTokenizer(path, token_translate=[("a", "<cls>")])
    with pytest.raises(TypeError, match="pre_tokenize"):
        keras_attn.SpTokenizer(path, pre_tokenize="jieba")
    returns_text = keras_attn.SpTokenizer(path, pre_tokenize=lambda text: text)
    with pytest.raises(TypeError, match="wrap it as a list"):
        returns_text.tokenize("ab")
    returns_ids = keras_attn.SpTokenizer(path, pre_tokenize=lambda text: [1, 2])
    with pytest.raises(TypeError, match="int 1"):
        returns_ids.tokenize("ab")
    pre_tokenized = keras_attn.SpTokenizer(path, pre_tokenize=str.split)
    with pytest.raises(ValueError, match="pre_tokenize"):
        pre_tokenized.rematch("ab cd")


def test_a_pre_tokenize_returning_none_is_named(character_model):
    path, _ = character_model
    tokenizer = keras_attn.SpTokenizer(path, pre_tokenize=lambda text: None)
    with pytest.raises(TypeError, match=r"pre_tokenize must return a list of strs; it returned NoneType None for the text 'ab'"):
        tokenizer.tokenize("ab")
