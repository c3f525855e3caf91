import inspect
import unicodedata

import pytest

import keras_attn
from tests.tokenizers.conftest import EXTRA_LINES
from tests.tokenizers.conftest import PARITY_TEXTS


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
        tokenizer.rematch(text, tokens[:1] + tokens[2:])


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


def bert_tokenizer_fast(vocab_path, do_lower_case):
    transformers = pytest.importorskip("transformers")
    parameters = inspect.signature(transformers.BertTokenizerFast.__init__).parameters
    argument = "vocab" if "vocab" in parameters else "vocab_file"
    return transformers.BertTokenizerFast(**{argument: vocab_path}, do_lower_case=do_lower_case)


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_blank_and_repeated_lines_keep_ids_equal_to_line_numbers(
    tmp_path, vocab_file, corpus, do_lower_case
):
    lines = open(vocab_file, encoding="utf-8").read().splitlines()
    the, json = lines.index("the"), lines.index("json")
    assert 10 < the and 10 < json
    # A blank line early, a whitespace-only line, a CRLF line end, and two
    # repeated tokens (one repeated before its first line is reached by the
    # later ids), so that every later id would shift if lines were skipped.
    lines.insert(10, "")
    lines.insert(40, "   ")
    lines[60] += "\r"
    lines.insert(120, "the")
    lines.append("json")
    lines.append("zzlastword")
    path = tmp_path / "vocab.txt"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))

    with pytest.warns(UserWarning) as record:
        ours = keras_attn.Tokenizer(str(path), do_lower_case=do_lower_case)
    messages = [str(warning.message) for warning in record]
    blank = next(m for m in messages if "blank" in m)
    assert str(path) in blank and "line 11 (id 10)" in blank and "line 41 (id 40)" in blank
    repeated = next(m for m in messages if "repeats" in m)
    stripped = [line.rstrip() for line in lines]
    for token in ("the", "json"):
        numbers = ", ".join(str(i + 1) for i, other in enumerate(stripped) if other == token)
        assert f"{token!r} on lines {numbers}" in repeated
    assert str(path) in repeated

    # Against the line numbers directly.
    assert ours.vocab_size == len(lines)
    for line_number, token in enumerate(stripped):
        assert ours.id_to_token(line_number) == token
        if token:
            last_line = max(i for i, other in enumerate(stripped) if other == token)
            assert ours.token_to_id(token) == last_line
    assert ours.encode("zzlastword")[0][1] == len(lines) - 1
    assert ours.token_to_id("json") == len(lines) - 2

    # Against BertTokenizerFast built from the same file.
    reference = bert_tokenizer_fast(str(path), do_lower_case)
    for text in PARITY_TEXTS + corpus[:200] + ["zzlastword the json"]:
        assert ours.encode(text)[0] == reference(text)["input_ids"], text
    ids = ours.encode("the json module")[0]
    assert ours.decode(ids) == "the json module"
    assert ours.decode([10, 40] + ids) == "the json module"  # placeholders decode to nothing


def test_latin1_vocabulary_names_file_line_and_byte_offset(tmp_path):
    data = "[PAD]\n[UNK]\n[CLS]\n[SEP]\ncafé\n".encode("latin-1")
    path = tmp_path / "vocab.txt"
    path.write_bytes(data)
    offset = data.index(b"\xe9")
    with pytest.raises(ValueError, match="UTF-8") as error:
        keras_attn.Tokenizer(str(path))
    message = str(error.value)
    assert str(path) in message and "line 5" in message and f"byte offset {offset}" in message
    # A byte-order mark shifts nothing and is not part of the first token.
    path.write_bytes(b"\xef\xbb\xbf" + "[PAD]\n[UNK]\n[CLS]\n[SEP]\ncafé\n".encode("utf-8"))
    tokenizer = keras_attn.Tokenizer(str(path), do_lower_case=False)
    assert tokenizer.pad_id == 0 and tokenizer.token_to_id("café") == 4


@pytest.fixture
def accent_vocab(tmp_path):
    path = tmp_path / "vocab.txt"
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "cafe", "Cafe", "e", "##t", "##e", "##s", "##\u0301", "x"]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


# text, do_lower_case, expected tokens between the specials, expected indices.
DECOMPOSED = [
    ("cafe\u0301", True, ["cafe"], [[0, 1, 2, 3, 4]]),
    ("cafe\u0301", False, ["cafe", "##\u0301"], [[0, 1, 2, 3], [4]]),
    ("Cafe\u0301s x", True, ["cafe", "##s", "x"], [[0, 1, 2, 3, 4], [5], [7]]),
    ("Cafe\u0301s x", False, ["Cafe", "##\u0301", "##s", "x"], [[0, 1, 2, 3], [4], [5], [7]]),
    ("e\u0301\u0301te\u0301", True, ["e", "##t", "##e"], [[0, 1, 2], [3], [4, 5]]),
    ("x cafe\u0301\u0301", True, ["x", "cafe"], [[0], [2, 3, 4, 5, 6, 7]]),
]


@pytest.mark.parametrize("text, do_lower_case, tokens, indices", DECOMPOSED)
def test_rematch_keeps_combining_accents_of_decomposed_text(
    accent_vocab, text, do_lower_case, tokens, indices
):
    tokenizer = keras_attn.Tokenizer(accent_vocab, do_lower_case=do_lower_case)
    assert tokenizer.tokenize(text) == ["[CLS]"] + tokens + ["[SEP]"]
    assert tokenizer.rematch(text) == [[]] + indices + [[]]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_rematch_covers_every_character_of_nfd_text(vocab_file, corpus, do_lower_case):
    tokenizer = keras_attn.Tokenizer(vocab_file, do_lower_case=do_lower_case)
    texts = [unicodedata.normalize("NFD", text) for text in EXTRA_LINES[:2] + corpus[:50]]
    texts += ["Café", "naïve résumé", "über"]
    texts = [unicodedata.normalize("NFD", text) for text in texts]
    for text in texts:
        mapping = tokenizer.rematch(text)
        covered = sorted(i for indices in mapping for i in indices)
        assert len(covered) == len(set(covered)), text
        # Every character but whitespace belongs to a token.
        expected = [i for i, c in enumerate(text) if not c.isspace()]
        assert covered == expected, text


def write_tokenizer_json(vocab_path, directory, lowercase):
    """A WordPiece `tokenizer.json` written by the `tokenizers` package from
    `vocab_path`'s tokens, with BERT's normalizer, pre-tokenizer and
    `[CLS] A [SEP] B [SEP]` template."""
    from tokenizers import Tokenizer as FastTokenizer
    from tokenizers import models, normalizers, pre_tokenizers, processors

    vocabulary = keras_attn.tokenizers.load_vocab(vocab_path)
    fast = FastTokenizer(models.WordPiece(vocabulary, unk_token="[UNK]"))
    fast.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    fast.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    fast.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocabulary["[CLS]"]), ("[SEP]", vocabulary["[SEP]"])],
    )
    path = directory / "tokenizer.json"
    fast.save(str(path))
    return str(path)


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_a_tokenizer_json_gives_transformers_ids(vocab_file, corpus, tmp_path, lowercase):
    """`Tokenizer.from_file` on a WordPiece tokenizer.json (file or
    directory without vocab.txt) equals transformers' fast tokenizer of the
    same file, lowercasing as the file says."""
    transformers = pytest.importorskip("transformers")
    path = write_tokenizer_json(vocab_file, tmp_path, lowercase)
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
    for ours in (keras_attn.Tokenizer.from_file(path), keras_attn.Tokenizer.from_file(tmp_path)):
        assert ours.vocab_size == len(reference.get_vocab())
        for text in PARITY_TEXTS + corpus[:300]:
            assert ours.encode(text)[0] == reference(text)["input_ids"], text
        for first, second in zip(corpus[:20], corpus[20:40]):
            expected = reference(first, second, return_token_type_ids=True)
            assert ours.encode(first, second) == (expected["input_ids"], expected["token_type_ids"])
    # The case setting is the file's: "The" is a piece of the cased vocabulary.
    assert (keras_attn.Tokenizer.from_file(path).tokenize("The")[1] == "The") is not lowercase


def test_a_transformers_directory_without_vocab_txt(vocab_file, tmp_path):
    """A directory as transformers' `save_pretrained` writes it, less its
    vocab.txt: the tokenizer comes from its tokenizer.json."""
    transformers = pytest.importorskip("transformers")
    reference = bert_tokenizer_fast(vocab_file, do_lower_case=False)
    reference.save_pretrained(str(tmp_path))
    for name in ("vocab.txt", "tokenizer_config.json"):
        if (tmp_path / name).exists():
            (tmp_path / name).unlink()
    assert (tmp_path / "tokenizer.json").exists()
    ours = keras_attn.Tokenizer.from_file(tmp_path)
    assert ours.vocab_path == str(tmp_path / "tokenizer.json")
    reloaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    for text in PARITY_TEXTS:
        assert ours.encode(text)[0] == reloaded(text)["input_ids"], text


def test_from_file_reads_vocab_txt_with_its_tokenizer_config(vocab_file, tmp_path):
    (tmp_path / "vocab.txt").write_text(open(vocab_file, encoding="utf-8").read(), encoding="utf-8")
    assert keras_attn.Tokenizer.from_file(tmp_path).tokenize("The")[1] == "the"
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    assert keras_attn.Tokenizer.from_file(tmp_path).tokenize("The")[1] == "The"
    assert keras_attn.Tokenizer.from_file(tmp_path, do_lower_case=True).tokenize("The")[1] == "the"


def test_from_file_errors_name_the_path_and_what_is_missing(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"'.*empty' holds no tokenizer: neither a vocab.txt nor a tokenizer.json"):
        keras_attn.Tokenizer.from_file(tmp_path / "empty")
    bpe = tmp_path / "tokenizer.json"
    bpe.write_text('{"model": {"type": "BPE", "vocab": {}, "merges": []}}')
    with pytest.raises(ValueError, match=r"tokenizer.json' does not describe a WordPiece model.*'BPE'.*BpeTokenizer"):
        keras_attn.Tokenizer.from_file(bpe)
    bpe.write_text('{"model": {"type": "WordPiece", "vocab": {"[UNK]": 0}}, "normalizer": {"type": "NFC"}}')
    with pytest.raises(ValueError, match=r"has the normalizer 'NFC'"):
        keras_attn.Tokenizer.from_file(bpe)
