import inspect
import unicodedata

import pytest

import keras_attn
from tests.tokenizers.conftest import EXTRA_LINES

PARITY_TEXTS = EXTRA_LINES + [
    "",
    "   ",
    "Hello, World! It's a test: (brackets) [square] {curly} -- dashes...",
    "The json module's JSONDecoder decodes JSON documents.",
    "supercalifragilisticexpialidocious" * 4,  # longer than 100 characters
    "ＦＵＬＬ-width ｌｅｔｔｅｒｓ and digits ０１２",
    "mixed中文and English混合text",
    "\u0301leading combining accent and trailing\u0301",
    "line\nbreaks\r\nand\ttabs",
]


@pytest.fixture(params=[True, False], ids=["uncased", "cased"])
def tokenizers_pair(request, vocab_file):
    transformers = pytest.importorskip("transformers")
    ours = keras_attn.Tokenizer(vocab_file, do_lower_case=request.param)
    # transformers 5 names the argument `vocab`, earlier releases `vocab_file`.
    parameters = inspect.signature(transformers.BertTokenizerFast.__init__).parameters
    argument = "vocab" if "vocab" in parameters else "vocab_file"
    reference = transformers.BertTokenizerFast(
        **{argument: vocab_file}, do_lower_case=request.param
    )
    assert len(reference.get_vocab()) == ours.vocab_size
    return ours, reference


def test_ids_equal_transformers_fast_tokenizer(tokenizers_pair, corpus):
    ours, reference = tokenizers_pair
    for text in PARITY_TEXTS + corpus[:300]:
        token_ids, segment_ids = ours.encode(text)
        assert token_ids == reference(text)["input_ids"], text
        assert segment_ids == [0] * len(token_ids)


def test_pairs_equal_transformers_fast_tokenizer(tokenizers_pair, corpus):
    ours, reference = tokenizers_pair
    for first, second in zip(corpus[:50], corpus[50:100]):
        expected = reference(first, second)
        assert ours.encode(first, second) == (expected["input_ids"], expected["token_type_ids"])


def test_typed_special_tokens_are_text(vocab_file):
    tokenizer = keras_attn.Tokenizer(vocab_file)
    token_ids, _ = tokenizer.encode("a [SEP] b [CLS] [MASK]")
    assert token_ids.count(tokenizer.sep_id) == 1  # only the real separator
    assert tokenizer.cls_id not in token_ids[1:]
    assert tokenizer.mask_id not in token_ids
    assert tokenizer.tokenize("[SEP]")[1:-1][:1] == ["["]


def test_truncation_pops_from_the_longer_text(vocab_file):
    tokenizer = keras_attn.Tokenizer(vocab_file)
    first = "the json module decodes documents and the parser reads arguments"
    second = "short text"
    full_first = tokenizer.tokenize(first)[1:-1]
    full_second = tokenizer.tokenize(second)[1:-1]
    maxlen = len(full_second) + 6 + 3
    token_ids, segment_ids = tokenizer.encode(first, second, maxlen=maxlen)
    assert len(token_ids) == maxlen
    tokens = tokenizer.ids_to_tokens(token_ids)
    assert tokens == ["[CLS]"] + full_first[:6] + ["[SEP]"] + full_second + ["[SEP]"]
    assert segment_ids == [0] * 8 + [1] * (len(full_second) + 1)
    # Both sides shrink once they are of equal length.
    token_ids, _ = tokenizer.encode(first, second, maxlen=5 + 3)
    assert tokenizer.ids_to_tokens(token_ids)[1:-1].count("[SEP]") == 1
    assert len(token_ids) == 8


def strip_accents(text):
    return "".join(
        c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
    )


def test_rematch_points_into_the_original_text(vocab_file):
    tokenizer = keras_attn.Tokenizer(vocab_file)
    text = "Café naïve, 中文测试 and JSONDecoder!"
    tokens = tokenizer.tokenize(text)
    mapping = tokenizer.rematch(text, tokens)
    assert len(mapping) == len(tokens)
    assert mapping[0] == [] and mapping[-1] == []
    for token, indices in zip(tokens[1:-1], mapping[1:-1]):
        original = "".join(text[i] for i in indices)
        if token != "[UNK]":
            assert strip_accents(original.lower()) == token.removeprefix("##"), (token, original)
    with pytest.raises(ValueError, match="tokenize"):
        tokenizer.rematch(text, tokens[:-1])


def test_decode_joins_pieces(vocab_file):
    tokenizer = keras_attn.Tokenizer(vocab_file)
    text = "the decoder reads json documents, then returns objects."
    assert tokenizer.decode(tokenizer.encode(text)[0]) == text
    assert tokenizer.decode(tokenizer.encode("中文测试")[0]) == "中文测试"


def test_ids_helpers_and_special_ids(vocab_file):
    tokenizer = keras_attn.Tokenizer(vocab_file)
    assert tokenizer.id_to_token(tokenizer.cls_id) == "[CLS]"
    assert tokenizer.pad_id == 0
    assert tokenizer.token_to_id("no-such-token-anywhere") == tokenizer.unk_id
    tokens = tokenizer.tokenize("json")
    assert tokenizer.ids_to_tokens(tokenizer.tokens_to_ids(tokens)) == tokens


def test_bad_vocabularies_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.txt"):
        keras_attn.Tokenizer(str(tmp_path / "nowhere.txt"))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nhello\n")
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        keras_attn.Tokenizer(str(vocab))
