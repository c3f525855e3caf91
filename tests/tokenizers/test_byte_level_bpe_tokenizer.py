"""BpeTokenizer against transformers' GPT2TokenizerFast on a byte-level BPE
trained here on standard-library docstrings."""

import inspect
import json
import shutil

import numpy as np
import pytest

import keras_attn
from tests.tokenizers.conftest import PARITY_TEXTS

END = "<|endoftext|>"

# Whitespace runs, scripts the corpus lacks, multi-codepoint emoji, astral
# characters, control characters and the end token typed as text.
BYTE_LEVEL_TEXTS = [
    "  two leading spaces",
    " one leading space",
    "trailing spaces   ",
    "\n\n\n",
    "\t\t\tx",
    "a  \n \t  b",
    "\r\n\r\n",
    " ",
    "👨‍👩‍👧‍👦 family, 🇯🇵 flag, 👍🏽 skin tone",
    "ｶﾀｶﾅ 한국어 العربية עברית ไทย",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 astral letters 𠀀",
    "e\u0301\u0301 stacked\u0308 marks",
    "it's I'm they'll we've",
    "12345678 3.14159 1,000,000",
    "\x00\x01\x7f\ufeff\ufffd control and replacement characters",
    END,
    f"a{END}b {END}{END}",
    "<|endoftext",
    "<|ENDOFTEXT|>",
]
TEXTS = PARITY_TEXTS + BYTE_LEVEL_TEXTS


@pytest.fixture(scope="module")
def bpe_directory(tmp_path_factory, corpus):
    """vocab.json, merges.txt and tokenizer.json of a 601-token byte-level
    BPE whose last id is `<|endoftext|>`, as in GPT-2 (id 50256)."""
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(corpus, vocab_size=600, show_progress=False)
    directory = tmp_path_factory.mktemp("bpe")
    trainer.save_model(str(directory))
    vocab_path = directory / "vocab.json"
    vocabulary = json.loads(vocab_path.read_text("utf-8"))
    vocabulary[END] = len(vocabulary)
    vocab_path.write_text(json.dumps(vocabulary, ensure_ascii=False), "utf-8")
    full = ByteLevelBPETokenizer(str(vocab_path), str(directory / "merges.txt"))
    full.add_special_tokens([END])
    full.save(str(directory / "tokenizer.json"))
    return directory


def gpt2_reference(directory, form, **kwargs):
    transformers = pytest.importorskip("transformers")
    if form == "tokenizer.json":
        return transformers.GPT2TokenizerFast(tokenizer_file=str(directory / "tokenizer.json"), **kwargs)
    # transformers 5 names the arguments `vocab` and `merges`, earlier
    # releases `vocab_file` and `merges_file`.
    parameters = inspect.signature(transformers.GPT2TokenizerFast.__init__).parameters
    names = ("vocab_file", "merges_file") if "vocab_file" in parameters else ("vocab", "merges")
    files = (str(directory / "vocab.json"), str(directory / "merges.txt"))
    return transformers.GPT2TokenizerFast(**dict(zip(names, files)), **kwargs)


def load(directory, form, **kwargs):
    if form == "tokenizer.json":
        return keras_attn.BpeTokenizer.from_file(directory / "tokenizer.json")
    return keras_attn.BpeTokenizer(directory / "vocab.json", directory / "merges.txt", **kwargs)


@pytest.fixture(scope="module", params=["vocab.json+merges.txt", "tokenizer.json"])
def tokenizers_pair(request, bpe_directory):
    reference = gpt2_reference(bpe_directory, request.param)
    ours = load(bpe_directory, request.param)
    assert ours.vocab_size == len(reference) == 601
    return ours, reference


def test_ids_and_offsets_equal_gpt2_tokenizer_fast(tokenizers_pair, corpus):
    ours, reference = tokenizers_pair
    for text in TEXTS + corpus[:300]:
        expected = reference(text, return_offsets_mapping=True)
        token_ids, segment_ids = ours.encode(text)
        assert token_ids == expected["input_ids"], text
        assert segment_ids == [0] * len(token_ids)
        assert ours.rematch(text) == [list(range(*span)) for span in expected["offset_mapping"]], text
        assert ours.tokenize(text) == reference.convert_ids_to_tokens(token_ids)


def test_add_prefix_space_equals_gpt2_tokenizer_fast(bpe_directory):
    reference = gpt2_reference(bpe_directory, "vocab.json+merges.txt", add_prefix_space=True)
    ours = load(bpe_directory, "vocab.json+merges.txt", add_prefix_space=True)
    plain = load(bpe_directory, "vocab.json+merges.txt")
    for text in ["Hello world", "json", " already spaced"] + PARITY_TEXTS:
        assert ours.encode(text)[0] == reference(text)["input_ids"], text
    # The first word gets its in-sentence ids.
    assert ours.encode("json")[0] == plain.encode(" json")[0] != plain.encode("json")[0]


def test_pairs_equal_gpt2_tokenizer_fast(tokenizers_pair, corpus):
    ours, reference = tokenizers_pair
    for first, second in zip(corpus[:30], corpus[30:60]):
        expected = reference(first, second, return_token_type_ids=True)
        assert ours.encode(first, second) == (expected["input_ids"], expected["token_type_ids"])


def test_decode_round_trips_every_byte(bpe_directory, corpus):
    tokenizer = load(bpe_directory, "vocab.json+merges.txt")
    for text in TEXTS + corpus[:100]:
        token_ids, _ = tokenizer.encode(text)
        assert tokenizer.decode(token_ids, skip_special_tokens=False) == text
        assert tokenizer.decode(token_ids) == text.replace(END, "")
    assert tokenizer.decode(np.array(tokenizer.encode("😀 x")[0])) == "😀 x"
    # A byte sequence cut inside a character gives U+FFFD for the rest.
    emoji_ids = tokenizer.encode("😀")[0]
    assert len(emoji_ids) > 1
    assert tokenizer.decode(emoji_ids[:-1]) == "\ufffd"


def test_end_token(bpe_directory):
    tokenizer = load(bpe_directory, "vocab.json+merges.txt")
    assert tokenizer.end_id == tokenizer.pad_id == tokenizer.vocab_size - 1 == 600
    assert tokenizer.id_to_token(tokenizer.end_id) == END
    assert tokenizer.token_to_id(END) == tokenizer.end_id
    assert tokenizer.encode(f"x{END}y")[0][1:2] == [tokenizer.end_id]
    assert tokenizer.decode([tokenizer.end_id]) == ""
    for name in ("cls_id", "sep_id", "unk_id", "mask_id"):
        with pytest.raises(ValueError, match="has no"):
            getattr(tokenizer, name)
    assert tokenizer.token_to_id("no such token") is None


def test_truncation(bpe_directory, corpus):
    tokenizer = load(bpe_directory, "vocab.json+merges.txt")
    first, second = corpus[0] + " " + corpus[1], "the parser"
    full_first, full_second = tokenizer.encode(first)[0], tokenizer.encode(second)[0]
    assert tokenizer.encode(first, maxlen=5) == (full_first[:5], [0] * 5)
    assert tokenizer.tokenize(first, maxlen=5) == tokenizer.ids_to_tokens(full_first[:5])
    maxlen = len(full_second) + 4
    assert tokenizer.encode(first, second, maxlen=maxlen) == (
        full_first[:4] + full_second,
        [0] * 4 + [1] * len(full_second),
    )
    with pytest.raises(ValueError, match=r"maxlen=0 .*minimum is 1"):
        tokenizer.encode(first, maxlen=0)


def test_loading_forms_agree(bpe_directory, tmp_path, corpus):
    files_only = tmp_path / "files_only"
    files_only.mkdir()
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(bpe_directory / name, files_only / name)
    loaded = [
        keras_attn.BpeTokenizer(str(bpe_directory / "vocab.json"), str(bpe_directory / "merges.txt")),
        keras_attn.BpeTokenizer.from_file(bpe_directory),  # prefers tokenizer.json
        keras_attn.BpeTokenizer.from_file(str(bpe_directory / "tokenizer.json")),
        keras_attn.BpeTokenizer.from_file(files_only),
    ]
    assert loaded[1].vocab_path.endswith("tokenizer.json")
    assert loaded[3].merges_path.endswith("merges.txt")
    for text in TEXTS + corpus[:50]:
        expected = loaded[0].encode(text)
        assert all(tokenizer.encode(text) == expected for tokenizer in loaded[1:]), text
    assert all(tokenizer.end_id == 600 for tokenizer in loaded)
    assert keras_attn.tokenizers.BpeTokenizer is keras_attn.BpeTokenizer


def test_inputs_are_checked(bpe_directory):
    tokenizer = load(bpe_directory, "vocab.json+merges.txt")
    with pytest.raises(TypeError, match=r"`first` must be a str, got bytes"):
        tokenizer.encode(b"the parser")
    with pytest.raises(ValueError, match=r"Token id 601 is out of range: the vocabulary has 601 ids"):
        tokenizer.decode([1, 601])
    with pytest.raises(TypeError, match=r"A token id must be an integer, got float"):
        tokenizer.decode([1.5])


# Errors name the file ---------------------------------------------------------


def write(path, content):
    path.write_text(content, encoding="utf-8")
    return str(path)


def test_missing_files_are_named(bpe_directory, tmp_path):
    merges = str(bpe_directory / "merges.txt")
    vocab = str(bpe_directory / "vocab.json")
    with pytest.raises(FileNotFoundError, match=r"BPE vocabulary file .*nowhere.json' does not exist"):
        keras_attn.BpeTokenizer(str(tmp_path / "nowhere.json"), merges)
    with pytest.raises(FileNotFoundError, match=r"BPE merges file .*nowhere.txt' does not exist"):
        keras_attn.BpeTokenizer(vocab, str(tmp_path / "nowhere.txt"))
    with pytest.raises(FileNotFoundError, match=r"Tokenizer file .*tokenizer.json' does not exist"):
        keras_attn.BpeTokenizer.from_file(tmp_path / "tokenizer.json")
    with pytest.raises(FileNotFoundError, match=r"holds neither a tokenizer.json nor a vocab.json"):
        keras_attn.BpeTokenizer.from_file(tmp_path)
    with pytest.raises(ValueError, match=r"empty.json' is empty \(0 bytes\)"):
        keras_attn.BpeTokenizer(write(tmp_path / "empty.json", ""), merges)


def test_malformed_vocabularies_are_named(bpe_directory, tmp_path):
    merges = str(bpe_directory / "merges.txt")
    vocabulary = json.loads((bpe_directory / "vocab.json").read_text("utf-8"))
    cases = [
        ("truncated.json", (bpe_directory / "vocab.json").read_text("utf-8")[:100], "is not valid UTF-8 JSON"),
        ("list.json", json.dumps(list(vocabulary)), "must hold a JSON object token -> id, found a JSON list"),
        ("gap.json", json.dumps({**vocabulary, END: 700}), r"token '<\|endoftext\|>' has id 700"),
        ("shared.json", json.dumps({**vocabulary, END: 3}), "share id 3"),
        (
            "not_bytes.json",
            json.dumps({token: i for i, token in enumerate(["a", "b", "ab"])}),
            r"not a byte-level vocabulary: it lacks the tokens of 254 of the 256 bytes \(e.g. byte 0x00",
        ),
    ]
    for name, content, message in cases:
        with pytest.raises(ValueError, match=rf"BPE vocabulary file .*{name}'.*{message}"):
            keras_attn.BpeTokenizer(write(tmp_path / name, content), merges)


def test_malformed_merges_are_named(bpe_directory, tmp_path):
    vocab = str(bpe_directory / "vocab.json")
    lines = (bpe_directory / "merges.txt").read_text("utf-8").split("\n")
    cases = [
        ("three.txt", lines[:3] + ["a b c"], r"line 4: expected two tokens separated by one space, found 'a b c'"),
        ("unknown.txt", lines[:2] + ["Ġ zzzz"], r"line 3 \('Ġ zzzz'\): the token 'zzzz' is not in the vocabulary"),
    ]
    for name, content, message in cases:
        with pytest.raises(ValueError, match=rf"BPE merges file .*{name}', {message}"):
            keras_attn.BpeTokenizer(vocab, write(tmp_path / name, "\n".join(content)))
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("#version: 0.2\nö x\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"BPE merges file .*latin1.txt' is not UTF-8"):
        keras_attn.BpeTokenizer(vocab, str(latin1))


def test_malformed_tokenizer_files_are_named(bpe_directory, tmp_path, vocab_file):
    from tokenizers import Tokenizer, models, pre_tokenizers

    wordpiece = Tokenizer(models.WordPiece.from_file(vocab_file, unk_token="[UNK]"))
    wordpiece.save(str(tmp_path / "wordpiece.json"))
    with pytest.raises(ValueError, match=r"wordpiece.json' does not describe a BPE model .*'WordPiece'"):
        keras_attn.BpeTokenizer.from_file(tmp_path / "wordpiece.json")
    description = json.loads((bpe_directory / "tokenizer.json").read_text("utf-8"))
    whitespace = Tokenizer(models.BPE())
    whitespace.pre_tokenizer = pre_tokenizers.Whitespace()
    description["pre_tokenizer"] = json.loads(whitespace.to_str())["pre_tokenizer"]
    with pytest.raises(ValueError, match=r"not_byte_level.json' is not byte-level"):
        keras_attn.BpeTokenizer.from_file(write(tmp_path / "not_byte_level.json", json.dumps(description)))
    with pytest.raises(ValueError, match=r"Tokenizer file .*text.json' is not valid UTF-8 JSON"):
        keras_attn.BpeTokenizer.from_file(write(tmp_path / "text.json", "vocab\nmerges\n"))
