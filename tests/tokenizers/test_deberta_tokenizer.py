"""A DeBERTa-v2/v3 folder's SentencePiece `spm.model` (no tokenizer.json,
as the released folders hold) read by HuggingFaceTokenizer against
transformers' AutoTokenizer (DebertaV2Tokenizer), on a Unigram model trained
here with DeBERTa's special pieces: single texts, pairs, maxlen, decoding,
and the config's `do_lower_case`, `split_by_punct` and `add_prefix_space`."""

import json
import shutil

import pytest

import keras_attn
from tests.tokenizers.test_huggingface_tokenizer import assert_encodes_and_decodes_as
from tests.tokenizers.test_huggingface_tokenizer import TEXTS

transformers = pytest.importorskip("transformers")

CONFIGS = {
    "default": {},
    "lower_punct": {"do_lower_case": True, "split_by_punct": True},
    "punct_no_prefix_space": {"split_by_punct": True, "add_prefix_space": False},
}


@pytest.fixture(scope="module")
def deberta_model(tmp_path_factory, corpus):
    """A Unigram `spm.model` numbered as DeBERTa-v3's: `[PAD]`, `[CLS]`,
    `[SEP]`, `[UNK]`, then `[MASK]` as a user-defined piece."""
    import sentencepiece

    prefix = tmp_path_factory.mktemp("deberta_spm") / "spm"
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus), model_prefix=str(prefix), vocab_size=400,
        model_type="unigram", pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]",
        bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]", user_defined_symbols=["[MASK]"],
        character_coverage=1.0, minloglevel=2,
    )
    return str(prefix) + ".model"


def folder_of(model, tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(model, folder / "spm.model")
    config = {"tokenizer_class": "DebertaV2Tokenizer", **CONFIGS[name]}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    return folder


@pytest.mark.parametrize("name", CONFIGS)
def test_spm_model_folder_equals_transformers(name, deberta_model, tmp_path):
    folder = folder_of(deberta_model, tmp_path, name)
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert type(reference).__name__ == "DebertaV2Tokenizer"
    tokenizer = keras_attn.HuggingFaceTokenizer(folder)
    assert_encodes_and_decodes_as(
        tokenizer, reference, TEXTS + ["a [MASK] b", "[CLS]x[SEP] y", "Hello, World!"]
    )
    expected = reference("first text, here", "and the second one")
    assert tokenizer.encode("first text, here", "and the second one") == (
        expected["input_ids"], expected["token_type_ids"]
    )
    truncated = reference(TEXTS[4], TEXTS[5], truncation=True, max_length=12)
    assert tokenizer.encode(TEXTS[4], TEXTS[5], maxlen=12)[0] == truncated["input_ids"]
    assert tokenizer.tokenize("a b")[0] == "[CLS]"


def test_the_spm_model_file_itself_and_its_special_tokens(deberta_model, tmp_path):
    folder = folder_of(deberta_model, tmp_path, "default")
    tokenizer = keras_attn.HuggingFaceTokenizer(folder / "spm.model")
    assert tokenizer.encode("Café")[0] == keras_attn.HuggingFaceTokenizer(folder).encode("Café")[0]
    assert (tokenizer.id_to_token(tokenizer.bos_id), tokenizer.id_to_token(tokenizer.eos_id)) == (
        "[CLS]", "[SEP]"
    )
    assert {"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"} <= tokenizer.special_tokens


def test_an_spm_model_without_a_known_tokenizer_class_is_refused(deberta_model, tmp_path):
    folder = tmp_path / "unknown"
    folder.mkdir()
    shutil.copy(deberta_model, folder / "spm.model")
    with pytest.raises(ValueError, match="spm.model.*DebertaV2Tokenizer.*found None"):
        keras_attn.HuggingFaceTokenizer(folder)


def test_the_config_options_change_the_ids(deberta_model, tmp_path):
    """The options compared above matter: each config encodes differently."""
    text = "Hello, World! It's (bracketed)"
    encoded = {
        name: tuple(keras_attn.HuggingFaceTokenizer(folder_of(deberta_model, tmp_path, name))
                    .encode(text)[0])
        for name in CONFIGS
    }
    assert len(set(encoded.values())) == len(CONFIGS), encoded
