"""bert4keras's tokenizer conventions: a token dict, `load_vocab` with
`simplified`/`startswith`, `rematch` of truncated tokens and `decode`'s
joining rules."""

import re
import unicodedata

import pytest

import keras_attn
from tests.tokenizers.test_wordpiece_tokenizer import bert_tokenizer_fast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "[unused1]", "it", "'", "s", "3", ".", "5", "hello", ",", "world", "!", "中", "文", "，",
    "测", "试", "play", "##ing", "don", "t", "(", "x", ")", "abc", "a", "+", "b", "##中",
    "中文", "a.b", "##,", "[", "é", "##ab",
]


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("b4k_vocab") / "vocab.txt"
    path.write_text("\n".join(SPECIALS + WORDS) + "\n", encoding="utf-8")
    return str(path)


# bert4keras's rules, written here from its documentation and source as the
# reference: CJK blocks, punctuation, the redundant-token test and decode.


def b4k_is_cjk(character):
    code = ord(character)
    ranges = [
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
    ]
    return any(low <= code <= high for low, high in ranges)


def b4k_is_punctuation(character):
    code = ord(character)
    ascii_symbol = code in range(33, 48) or code in range(58, 65) or code in range(91, 97) or code in range(123, 127)
    return ascii_symbol or unicodedata.category(character)[0] == "P"


def b4k_is_redundant(token):
    stem = token[2:] if token[:2] == "##" else token
    return len(token) > 1 and any(b4k_is_cjk(c) or b4k_is_punctuation(c) for c in stem)


B4K_CJK_PUNCTUATION = (
    "\uff02\uff03\uff04\uff05\uff06\uff07\uff08\uff09\uff0a\uff0b\uff0c\uff0d\uff0f\uff1a\uff1b"
    "\uff1c\uff1d\uff1e\uff20\uff3b\uff3c\uff3d\uff3e\uff3f\uff40\uff5b\uff5c\uff5d\uff5e\uff5f"
    "\uff60\uff62\uff63\uff64\u3000\u3001\u3003\u3008\u3009\u300a\u300b\u300c\u300d\u300e\u300f"
    "\u3010\u3011\u3014\u3015\u3016\u3017\u3018\u3019\u301a\u301b\u301c\u301d\u301e\u301f\u3030"
    "\u303e\u303f\u2013\u2014\u2018\u2019\u201b\u201c\u201d\u201e\u201f\u2026\u2027\ufe4f\ufe51"
    "\ufe54\u00b7\uff01\uff1f\uff61\u3002"
)


def b4k_decode(tokens):
    tokens = [t for t in tokens if not (t and t[0] == "[" and t[-1] == "]")]
    text = ""
    for i, token in enumerate(tokens):
        if token[:2] == "##":
            text += token[2:]
        elif len(token) == 1 and b4k_is_cjk(token):
            text += token
        elif len(token) == 1 and b4k_is_punctuation(token):
            text += token + " "
        elif i > 0 and b4k_is_cjk(text[-1]):
            text += token
        else:
            text += " " + token
    text = re.sub(" +", " ", text)
    text = re.sub("' (re|m|s|t|ve|d|ll) ", "'\\1 ", text)
    alternatives = "|".join(re.escape(p) for p in B4K_CJK_PUNCTUATION + "+-/={(<[")
    text = re.sub(f"({alternatives}) ", "\\1", text)
    text = re.sub(r"(\d\.) (\d)", "\\1\\2", text)
    return text.strip()


# The token dict ------------------------------------------------------------------


def test_tokenizer_from_a_token_dict_equals_the_file(vocab_file, corpus):
    from_file = keras_attn.Tokenizer(vocab_file)
    token_dict = keras_attn.load_vocab(vocab_file)
    from_dict = keras_attn.Tokenizer(token_dict)
    assert from_dict.vocab_size == from_file.vocab_size
    for text in corpus[::40]:
        assert from_dict.encode(text, maxlen=24) == from_file.encode(text, maxlen=24)
    assert from_dict.decode(from_file.encode(corpus[3])[0]) == from_file.decode(from_file.encode(corpus[3])[0])


@pytest.mark.parametrize(
    "token_dict, message",
    [
        ({"[UNK]": 0, "[CLS]": 1, "[SEP]": 3}, "'\\[SEP\\]' has id 3"),
        ({"[UNK]": 0, "[CLS]": 1, "[SEP]": 1}, "as '\\[CLS\\]' has"),
        ({"[UNK]": 0, "[CLS]": 1, "a": 2}, "lacks the tokens \\['\\[SEP\\]'\\]"),
    ],
)
def test_bad_token_dicts_are_named(token_dict, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.Tokenizer(token_dict)


# load_vocab ----------------------------------------------------------------------


def test_load_vocab_simplified_keeps_what_bert4keras_keeps(small_vocab):
    ids = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    assert keras_attn.load_vocab(small_vocab) == ids
    startswith = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    token_dict, keep_tokens = keras_attn.load_vocab(small_vocab, simplified=True, startswith=startswith)
    dropped = {"[MASK]", "[unused1]", "##中", "中文", "a.b", "##,"}
    expected = startswith + [t for t in WORDS if t not in dropped]
    assert list(token_dict) == expected
    assert list(token_dict.values()) == list(range(len(expected)))
    assert keep_tokens == [ids[t] for t in expected]
    # bert4keras's spelling, `dict_path=`, reads the same file.
    assert keras_attn.load_vocab(dict_path=small_vocab, simplified=True, startswith=startswith) == (
        token_dict, keep_tokens
    )
    with pytest.raises(TypeError, match="as `path` or as bert4keras's `dict_path`"):
        keras_attn.load_vocab(small_vocab, dict_path=small_vocab)
    # The same through the reference rule.
    assert expected == startswith + [t for t in SPECIALS + WORDS if t not in startswith and not b4k_is_redundant(t)]


def test_load_vocab_simplified_on_a_trained_vocabulary(vocab_file):
    full = keras_attn.load_vocab(vocab_file)
    startswith = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    token_dict, keep_tokens = keras_attn.load_vocab(vocab_file, simplified=True, startswith=startswith)
    by_id = sorted(full, key=full.get)
    expected = startswith + [t for t in by_id if t not in startswith and not b4k_is_redundant(t)]
    assert list(token_dict) == expected
    assert keep_tokens == [full[t] for t in expected]
    # A trained WordPiece vocabulary holds no redundant tokens; with [MASK]
    # listed, nothing is dropped.
    assert len(expected) == len(full)
    # The simplified tokenizer encodes to the kept ids.
    tokenizer, simple = keras_attn.Tokenizer(vocab_file), keras_attn.Tokenizer(token_dict)
    text = "the json decoder reads documents"
    assert [keep_tokens[i] for i in simple.encode(text)[0]] == tokenizer.encode(text)[0]


def test_simplified_tokenizer_encodes_to_the_kept_ids(small_vocab):
    tokenizer = keras_attn.Tokenizer(small_vocab)
    token_dict, keep_tokens = keras_attn.load_vocab(
        small_vocab, simplified=True, startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    )
    simple = keras_attn.Tokenizer(token_dict)
    assert simple.vocab_size == len(keep_tokens) < tokenizer.vocab_size
    text = "hello, world! 中文 playing"
    token_ids = simple.encode(text)[0]
    assert [keep_tokens[i] for i in token_ids] == tokenizer.encode(text)[0]
    assert simple.decode(token_ids) == tokenizer.decode(tokenizer.encode(text)[0]) == "hello, world! 中文playing"


def test_load_vocab_startswith_must_be_in_the_vocabulary(small_vocab):
    with pytest.raises(ValueError, match=r"\['\[BOS\]'\] are not in vocabulary"):
        keras_attn.load_vocab(small_vocab, simplified=True, startswith=["[CLS]", "[BOS]"])


# rematch of truncated tokens --------------------------------------------------------


def test_rematch_of_truncated_tokens_matches_independent_offsets(vocab_file):
    reference = bert_tokenizer_fast(vocab_file, do_lower_case=True)
    tokenizer = keras_attn.Tokenizer(vocab_file)
    text = "Café naïve, 中文测试 and JSONDecoder reads documents!"
    encoded = reference(text, return_offsets_mapping=True)
    offsets = [list(range(start, end)) for start, end in encoded["offset_mapping"]]
    for maxlen in (3, 8, 12, 100):
        tokens = tokenizer.tokenize(text, maxlen=maxlen)
        assert len(tokens) == min(maxlen, len(offsets))
        mapping = tokenizer.rematch(text, tokens)
        expected = offsets[: len(tokens) - 1] + [[]]
        assert reference.convert_ids_to_tokens(encoded["input_ids"])[: len(tokens) - 1] == tokens[:-1]
        assert mapping == expected, maxlen
        # Without the specials too.
        assert tokenizer.rematch(text, tokens[1:-1]) == expected[1:-1]
    with pytest.raises(ValueError, match="token 2 is"):
        tokenizer.rematch(text, tokens[:2] + ["zzz"])


def test_rematch_of_truncated_sentencepiece_tokens_is_a_prefix(sentencepiece_model):
    tokenizer = keras_attn.SpTokenizer(sentencepiece_model)
    text = "the json module decodes documents and the parser reads arguments"
    full = tokenizer.rematch(text)
    tokens = tokenizer.tokenize(text, maxlen=6)
    mapping = tokenizer.rematch(text, tokens)
    assert len(mapping) == len(tokens) < len(full)
    assert mapping[:-1] == full[: len(tokens) - 1] and mapping[-1] == []


# decode --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, expected",
    [
        (["it", "'", "s", "hello"], "it's hello"),
        (["it", "'", "s"], "it's"),
        (["don", "'", "t", "play"], "don't play"),
        (["3", ".", "5"], "3.5"),
        (["hello", ",", "world", "!"], "hello, world!"),
        (["play", "##ing", "abc"], "playing abc"),
        (["中", "文", "，", "测", "试"], "中文，测试"),
        (["中", "文", "abc", "hello"], "中文abc hello"),
        (["(", "x", ")", "a", "+", "b"], "(x) a+b"),
        (["[CLS]", "hello", "[SEP]", "[PAD]"], "hello"),
    ],
)
def test_decode_joins_as_bert4keras(small_vocab, tokens, expected):
    tokenizer = keras_attn.Tokenizer(small_vocab)
    assert tokenizer.decode(tokenizer.tokens_to_ids(tokens)) == expected
    if not expected.endswith("it's"):  # bert4keras leaves `it' s` at the very end
        assert b4k_decode(tokens) == expected


def test_decode_agrees_with_bert4keras_rules_on_text(vocab_file, corpus):
    tokenizer = keras_attn.Tokenizer(vocab_file)
    for text in corpus[::25]:
        token_ids = tokenizer.encode(text)[0]
        expected = b4k_decode(tokenizer.ids_to_tokens(token_ids))
        if re.search(r"' (re|m|s|t|ve|d|ll)$", expected):
            continue  # the one rule joined at the end here, not in bert4keras
        assert tokenizer.decode(token_ids) == expected, text


def test_vocab_path_keyword_still_reads_the_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    by_keyword = keras_attn.Tokenizer(vocab_path=str(path))
    assert by_keyword.encode("hello")[0] == keras_attn.Tokenizer(str(path)).encode("hello")[0] == [2, 4, 3]
    with pytest.raises(TypeError, match="once"):
        keras_attn.Tokenizer(str(path), vocab_path=str(path))


def test_token_start_and_end_none_encode_without_cls_and_sep(small_vocab):
    """Issue 34, item 17: GPT2-ML's script builds bert4keras's
    `Tokenizer(path, token_start=None, token_end=None)`: no `[CLS]` and no
    `[SEP]`, a pair is the two texts' tokens with segments 0 then 1 (its
    `encode`). `cls_token=None`/`sep_token=None` are the same."""
    plain = keras_attn.Tokenizer(small_vocab)
    first, second = plain.tokenize("hello, world")[1:-1], plain.tokenize("don't")[1:-1]
    for bare in (
        keras_attn.Tokenizer(small_vocab, token_start=None, token_end=None),
        keras_attn.Tokenizer(small_vocab, cls_token=None, sep_token=None),
    ):
        assert bare.tokenize("hello, world") == first
        token_ids, segment_ids = bare.encode("hello, world", "don't")
        assert token_ids == plain.tokens_to_ids(first + second)
        assert segment_ids == [0] * len(first) + [1] * len(second)
        assert bare.encode("hello, world", maxlen=2)[0] == plain.tokens_to_ids(first[:2])
        with pytest.raises(ValueError, match=r"no \[CLS\]/start token"):
            bare.cls_id
    # One of the two: [CLS] text, without the closing [SEP].
    start_only = keras_attn.Tokenizer(small_vocab, token_end=None)
    assert start_only.tokenize("hello") == ["[CLS]", "hello"]
    assert start_only.encode("hello")[0] == plain.tokens_to_ids(["[CLS]", "hello"])
    with pytest.raises(TypeError, match="`cls_token` or bert4keras's `token_start`"):
        keras_attn.Tokenizer(small_vocab, cls_token="[CLS]", token_start=None)
    with pytest.raises(ValueError, match=r"lacks the tokens \['<s>'\]"):
        keras_attn.Tokenizer(small_vocab, token_start="<s>")
