"""HuggingFaceTokenizer (a folder's tokenizer.json, or LLaMA-2's
tokenizer.model) and SpTokenizer on LLaMA-2's SentencePiece model against
transformers' AutoTokenizer, on tokenizers trained here: Qwen2- and
LLaMA-3-style byte-level BPEs and a LLaMA-2-style SentencePiece BPE with
byte fallback."""

import json
import shutil

import pytest

import keras_attn
from tests.tokenizers.conftest import PARITY_TEXTS

MULTILINGUAL_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Ça va? Crème brûlée, smörgåsbord, Dvořák, São Paulo, Łódź.",
    "机器学习是人工智能的一个分支。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 문장입니다. 안녕하세요!",
    "النص العربي من اليمين إلى اليسار",
    "emoji 😀👍🏽 ❤️ 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵 and 🧑🏿‍💻",
    "  two leading spaces",
    "trailing spaces   ",
    "runs    of     spaces",
    "\n\nnewlines\n\n\nand\ttabs\t\t",
    "def square(x):\n    return x ** 2  # 平方\n",
    "{'key': [1, 2, 3], \"value\": None}",
    "numbers 1234567890 3.14159",
    "mixed中文and English混合text with émoji 🎉",
]
TEXTS = PARITY_TEXTS + MULTILINGUAL_TEXTS


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


def _train_byte_level_bpe(corpus, special_tokens):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus + MULTILINGUAL_TEXTS * 5, trainer)
    return tokenizer


@pytest.fixture(scope="module")
def qwen_folder(tmp_path_factory, corpus, transformers):
    """A Qwen2-style folder: byte-level BPE, no bos, `<|endoftext|>` as eos
    and pad, chat tokens added as specials, saved by transformers."""
    tokenizer = _train_byte_level_bpe(corpus, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    reference = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    folder = tmp_path_factory.mktemp("qwen")
    reference.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def llama3_folder(tmp_path_factory, corpus, transformers):
    """A LLaMA-3-style folder: byte-level BPE whose tokenizer.json template
    puts `<|begin_of_text|>` first; the config has no add_bos_token."""
    from tokenizers import processors

    tokenizer = _train_byte_level_bpe(corpus, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
    tokenizer.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                special_tokens=[("<|begin_of_text|>", tokenizer.token_to_id("<|begin_of_text|>"))],
            ),
        ]
    )
    folder = tmp_path_factory.mktemp("llama3")
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>",
        "clean_up_tokenization_spaces": True,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    return folder


@pytest.fixture(scope="module")
def llama2_model(tmp_path_factory, corpus):
    """A LLaMA-2-style SentencePiece BPE: byte fallback, digits split,
    identity normalisation, whitespace kept, `<unk>` 0, `<s>` 1, `</s>` 2,
    plus user-defined pieces (`[INST]`) and a control piece."""
    import sentencepiece

    folder = tmp_path_factory.mktemp("llama2")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus + MULTILINGUAL_TEXTS * 5),
        model_prefix=str(folder / "tokenizer"),
        vocab_size=600,
        model_type="bpe",
        byte_fallback=True,
        split_digits=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        character_coverage=0.9995,
        user_defined_symbols=["[INST]", "<|user|>"],
        control_symbols=["<ctrl>"],
        minloglevel=2,
    )
    (folder / "tokenizer.vocab").unlink()
    return folder / "tokenizer.model"


@pytest.fixture(scope="module")
def llama2_folder(tmp_path_factory, llama2_model, transformers):
    """A LLaMA-2 folder as released: tokenizer.model, the tokenizer.json
    transformers converts it to, and a config adding `<s>` only."""
    folder = tmp_path_factory.mktemp("llama2_folder")
    shutil.copy(llama2_model, folder / "tokenizer.model")
    config = {
        "tokenizer_class": "LlamaTokenizer",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": None,
        "add_bos_token": True,
        "add_eos_token": False,
        "legacy": False,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    transformers.AutoTokenizer.from_pretrained(str(folder)).save_pretrained(str(folder))
    (folder / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    return folder


FOLDERS = ["qwen_folder", "llama3_folder", "llama2_folder"]


@pytest.mark.parametrize("folder_fixture", FOLDERS)
def test_encode_and_decode_equal_transformers(request, folder_fixture, transformers):
    folder = request.getfixturevalue(folder_fixture)
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    tokenizer = keras_attn.HuggingFaceTokenizer(folder)
    assert_encodes_and_decodes_as(tokenizer, reference, TEXTS)


def test_special_tokens_follow_the_folder(qwen_folder, llama3_folder, llama2_folder):
    qwen = keras_attn.HuggingFaceTokenizer(qwen_folder)
    assert qwen.encode("hi")[0] == qwen.encode("hi", maxlen=10)[0]
    assert qwen.id_to_token(qwen.eos_id) == "<|endoftext|>" == qwen.id_to_token(qwen.pad_id)
    assert qwen.end_id == qwen.eos_id
    with pytest.raises(ValueError, match="bos_token"):
        qwen.bos_id
    # Chat tokens typed in a text are one id each.
    ids, _ = qwen.encode("<|im_start|>user\nhi<|im_end|>")
    assert ids[0] == qwen.token_to_id("<|im_start|>") and ids[-1] == qwen.token_to_id("<|im_end|>")
    assert qwen.decode(ids) == "user\nhi"

    llama3 = keras_attn.HuggingFaceTokenizer(llama3_folder / "tokenizer.json")
    assert llama3.encode("hi")[0][0] == llama3.bos_id
    assert llama3.tokenize("hi")[0] == "<|begin_of_text|>"

    llama2 = keras_attn.HuggingFaceTokenizer(llama2_folder)
    ids, _ = llama2.encode("hello")
    assert ids[0] == llama2.bos_id == 1 and llama2.eos_id not in ids


@pytest.mark.parametrize("folder_fixture", FOLDERS)
def test_pairs_and_maxlen_equal_transformers(request, folder_fixture, transformers):
    folder = request.getfixturevalue(folder_fixture)
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    tokenizer = keras_attn.HuggingFaceTokenizer(folder)
    first, second = "机器学习是人工智能的一个分支 and more words", "emoji 😀 here"
    expected = reference(first, second)
    token_ids, segment_ids = tokenizer.encode(first, second)
    assert token_ids == expected["input_ids"]
    if "token_type_ids" in expected:
        assert segment_ids == expected["token_type_ids"]
    for maxlen in (2, 3, 4, 5, 8, 12, 200):
        truncated = reference(first, second, max_length=maxlen, truncation="longest_first")["input_ids"]
        assert tokenizer.encode(first, second, maxlen=maxlen)[0] == truncated, maxlen
    with pytest.raises(ValueError, match="maxlen=0"):
        tokenizer.encode(first, maxlen=0)


def test_the_tokenizer_json_decides_the_added_tokens_as_in_transformers(tmp_path, llama2_folder, transformers):
    """transformers 5 ignores `add_eos_token` in the config where a
    tokenizer.json is present: its post-processor adds `<s>` only."""
    folder = tmp_path / "eos"
    shutil.copytree(llama2_folder, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text("utf-8"))
    config["add_eos_token"] = True
    (folder / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    tokenizer = keras_attn.HuggingFaceTokenizer(folder)
    for text in ("hello world", "中文 😀", ""):
        assert tokenizer.encode(text)[0] == reference(text)["input_ids"]
    assert tokenizer.encode("a", "b")[0] == reference("a", "b")["input_ids"]


def test_sentencepiece_model_alone_equals_transformers_llama(llama2_model, transformers, tmp_path):
    """`SpTokenizer(path, sep_token=None)` runs SentencePiece itself: `<s>`
    then SentencePiece's pieces, as transformers' LlamaTokenizer gives them
    except on runs of spaces, where SentencePiece and transformers'
    conversion of the model merge differently (HuggingFaceTokenizer follows
    transformers there)."""
    folder = tmp_path / "model_only"
    folder.mkdir()
    shutil.copy(llama2_model, folder / "tokenizer.model")
    config = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "legacy": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    tokenizer = keras_attn.SpTokenizer(folder / "tokenizer.model", sep_token=None)
    compared = [text for text in TEXTS if "  " not in text and not text.startswith(" ") and text.strip()]
    assert len(compared) > 20
    for text in compared:
        token_ids, _ = tokenizer.encode(text)
        assert token_ids == reference(text)["input_ids"], text
        assert tokenizer.decode(token_ids) == reference.decode(token_ids, skip_special_tokens=True), text


MODEL_ONLY_CONFIGS = {
    "llama2": {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "legacy": False},
    "legacy_with_eos": {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": True, "legacy": True},
    "llama_class_defaults": {"tokenizer_class": "LlamaTokenizer"},
}


@pytest.mark.parametrize("name", MODEL_ONLY_CONFIGS)
def test_sentencepiece_model_folder_equals_transformers(name, tmp_path, llama2_model, transformers):
    """A folder with LLaMA-2's tokenizer.model and no tokenizer.json: the
    model converted as transformers converts it, whitespace runs included."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(llama2_model, folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text(json.dumps(MODEL_ONLY_CONFIGS[name]), "utf-8")
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    tokenizer = keras_attn.HuggingFaceTokenizer(folder)
    for text in TEXTS + ["x <s> y </s> z", "<unk>", "a<s>b", "[INST] hi <|user|>x<ctrl> y", "a[INST]b"]:
        token_ids, _ = tokenizer.encode(text)
        assert token_ids == reference(text)["input_ids"], text
        for skip in (True, False):
            assert tokenizer.decode(token_ids, skip_special_tokens=skip) == reference.decode(
                token_ids, skip_special_tokens=skip
            ), (text, skip)
    assert tokenizer.encode("a b", "c")[0] == reference("a b", "c")["input_ids"]
    assert tokenizer.id_to_token(tokenizer.eos_id) == "</s>"
    model = keras_attn.HuggingFaceTokenizer(folder / "tokenizer.model")
    assert model.encode("Ça va? 😀")[0] == tokenizer.encode("Ça va? 😀")[0]


def test_missing_and_corrupt_files_are_named(tmp_path, llama2_model, sentencepiece_model):
    with pytest.raises(FileNotFoundError, match="holds no tokenizer"):
        keras_attn.HuggingFaceTokenizer(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.model").write_bytes(b"\x00not a model")
    (broken / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}', "utf-8")
    with pytest.raises(ValueError, match="broken/tokenizer.model"):
        keras_attn.HuggingFaceTokenizer(broken)
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    shutil.copy(llama2_model, unknown / "tokenizer.model")
    with pytest.raises(ValueError, match="tokenizer.model.*tokenizer_class.*found None.*SpTokenizer"):
        keras_attn.HuggingFaceTokenizer(unknown)
    unigram = tmp_path / "unigram"
    unigram.mkdir()
    shutil.copy(sentencepiece_model, unigram / "tokenizer.model")
    (unigram / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}', "utf-8")
    with pytest.raises(ValueError, match="unigram/tokenizer.model.*not a BPE model"):
        keras_attn.HuggingFaceTokenizer(unigram)
    (unknown / "tokenizer_config.json").write_text('{"tokenizer_class": "T5Tokenizer"}', "utf-8")
    with pytest.raises(ValueError, match="found 'T5Tokenizer'"):
        keras_attn.HuggingFaceTokenizer(unknown / "tokenizer.model")
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        keras_attn.HuggingFaceTokenizer(tmp_path / "nowhere.json")
    path = tmp_path / "tokenizer.json"
    path.write_text("", "utf-8")
    with pytest.raises(ValueError, match="tokenizer.json.*empty"):
        keras_attn.HuggingFaceTokenizer(tmp_path)
    path.write_text("{not json", "utf-8")
    with pytest.raises(ValueError, match="tokenizer.json.*not valid UTF-8 JSON"):
        keras_attn.HuggingFaceTokenizer(tmp_path)
    path.write_text('{"version": "1.0"}', "utf-8")
    with pytest.raises(ValueError, match="tokenizer.json.*no `model`"):
        keras_attn.HuggingFaceTokenizer(path)
    path.write_text('{"version": "1.0", "model": {"type": "Nonsense"}}', "utf-8")
    with pytest.raises(ValueError, match="tokenizer.json.*could not be loaded"):
        keras_attn.HuggingFaceTokenizer(path)
    with pytest.raises(TypeError, match="path"):
        keras_attn.HuggingFaceTokenizer(3)


def test_unknown_special_token_and_bad_settings_are_named(tmp_path, qwen_folder):
    folder = tmp_path / "bad"
    shutil.copytree(qwen_folder, folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text("utf-8"))
    config["bos_token"] = "<|no_such_token|>"
    config_path.write_text(json.dumps(config), "utf-8")
    with pytest.raises(ValueError, match=r"tokenizer_config.json.*bos_token '<\|no_such_token\|>'"):
        keras_attn.HuggingFaceTokenizer(folder)
    config["bos_token"] = 7
    config_path.write_text(json.dumps(config), "utf-8")
    with pytest.raises(ValueError, match="tokenizer_config.json.*bos_token must be"):
        keras_attn.HuggingFaceTokenizer(folder)
    config["bos_token"] = None
    config["clean_up_tokenization_spaces"] = "yes"
    config_path.write_text(json.dumps(config), "utf-8")
    with pytest.raises(ValueError, match="tokenizer_config.json.*clean_up_tokenization_spaces must be true or false"):
        keras_attn.HuggingFaceTokenizer(folder)
    config_path.write_text("[1, 2]", "utf-8")
    with pytest.raises(ValueError, match="tokenizer_config.json.*JSON object"):
        keras_attn.HuggingFaceTokenizer(folder)


def test_bad_ids_and_texts_are_clear_errors(qwen_folder):
    tokenizer = keras_attn.HuggingFaceTokenizer(qwen_folder)
    with pytest.raises(ValueError, match=f"Token id {tokenizer.vocab_size} is out of range"):
        tokenizer.decode([0, tokenizer.vocab_size])
    with pytest.raises(TypeError, match="integer"):
        tokenizer.decode([1.5])
    with pytest.raises(TypeError, match="`first` must be a str"):
        tokenizer.encode(b"bytes")
    with pytest.raises(TypeError, match="`second` must be a str"):
        tokenizer.encode("a", 3)


def test_rematch_maps_tokens_to_characters(qwen_folder):
    tokenizer = keras_attn.HuggingFaceTokenizer(qwen_folder)
    text = "Café 中文 text"
    mapping = tokenizer.rematch(text)
    assert len(mapping) == len(tokenizer.tokenize(text))
    # A byte-level token may hold part of a character's bytes: characters
    # are shared then, none is left out.
    assert {i for indices in mapping for i in indices} == set(range(len(text)))
    tokens = tokenizer.tokenize(text)
    for token, indices in zip(tokens, mapping):
        if all(ord(text[i]) < 128 for i in indices):
            assert tokenizer.decode(tokenizer.tokens_to_ids([token])) == "".join(text[i] for i in indices)


def test_special_tokens_map_and_added_token_objects(tmp_path, qwen_folder, transformers):
    """Special tokens from `special_tokens_map.json` in transformers'
    `{"content": ...}` form; `tokenizer_config.json` wins where both name
    one."""
    folder = tmp_path / "map"
    shutil.copytree(qwen_folder, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text("utf-8"))
    for role in ("bos_token", "eos_token", "pad_token", "unk_token"):
        config.pop(role, None)
    config["eos_token"] = "<|im_end|>"
    (folder / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    token = {"content": "<|im_start|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
    mapping = {"bos_token": token, "eos_token": "<|endoftext|>", "pad_token": None}
    (folder / "special_tokens_map.json").write_text(json.dumps(mapping), "utf-8")
    tokenizer = keras_attn.HuggingFaceTokenizer(folder)
    assert tokenizer.id_to_token(tokenizer.bos_id) == "<|im_start|>"
    assert tokenizer.id_to_token(tokenizer.eos_id) == "<|im_end|>"
    with pytest.raises(ValueError, match="padding"):
        tokenizer.pad_id


def test_wordpiece_tokenizer_json_with_clean_up_equals_transformers(tmp_path, vocab_file, transformers):
    """Any model's tokenizer.json: a BERT WordPiece one, whose decode
    transformers cleans up (`clean_up_tokenization_spaces`, never applied
    to BPE), with `[CLS] a [SEP] b [SEP]` from its post-processor."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocabulary = {token: i for i, token in enumerate(open(vocab_file, encoding="utf-8").read().split("\n")[:-1])}
    tokenizer = Tokenizer(models.WordPiece(vocabulary, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.post_processor = processors.BertProcessing(
        ("[SEP]", vocabulary["[SEP]"]), ("[CLS]", vocabulary["[CLS]"])
    )
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "[UNK]",
        "pad_token": "[PAD]",
        "clean_up_tokenization_spaces": True,
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    reference = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    ours = keras_attn.HuggingFaceTokenizer(tmp_path)
    for text in TEXTS + ["Hello , world ! it 's here ."]:
        token_ids, segment_ids = ours.encode(text)
        assert token_ids == reference(text)["input_ids"], text
        for skip in (True, False):
            assert ours.decode(token_ids, skip_special_tokens=skip) == reference.decode(
                token_ids, skip_special_tokens=skip
            ), (text, skip)
    expected = reference("first text", "second", return_token_type_ids=True)
    assert ours.encode("first text", "second") == (expected["input_ids"], expected["token_type_ids"])
    assert ours.tokenize("the json")[0] == "[CLS]" and ours.tokenize("the json")[-1] == "[SEP]"
    numpy = pytest.importorskip("numpy")
    assert ours.decode(numpy.array(token_ids)) == ours.decode(token_ids)


def assert_encodes_and_decodes_as(tokenizer, reference, texts):
    """`tokenizer` gives each of `texts` the ids of transformers'
    `reference`, one segment, and decodes them as it does, with and
    without special tokens."""
    for text in texts:
        token_ids, segment_ids = tokenizer.encode(text)
        assert token_ids == reference(text)["input_ids"], text
        assert segment_ids == [0] * len(token_ids)
        for skip in (True, False):
            assert tokenizer.decode(token_ids, skip_special_tokens=skip) == reference.decode(
                token_ids, skip_special_tokens=skip
            ), (text, skip)
