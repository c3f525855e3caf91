"""Vocabularies and models trained at test time on local text."""

import inspect
import json

import pytest

EXTRA_LINES = [
    "中文分词的测试，包括标点符号。北京欢迎你！",
    "Café naïve résumé façade Ångström über straße",
    "emoji 😀 and 👍🏽 and ❤️ sit among words",
    "Tabs\tand\u200bzero width\u00a0spaces, control \x00 chars",
]

# Texts every tokenizer is compared with its reference on.
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


def local_corpus():
    """Docstrings of standard-library modules, plus a few hand-written lines
    covering scripts the docstrings lack."""
    import argparse
    import collections
    import json as json_module
    import textwrap

    lines = []
    for module in (argparse, collections, json_module, textwrap):
        for _, member in inspect.getmembers(module):
            doc = inspect.getdoc(member)
            if doc:
                lines.extend(line for line in doc.splitlines() if line.strip())
    return lines + EXTRA_LINES * 20


@pytest.fixture(scope="session")
def corpus():
    return local_corpus()


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory, corpus):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=800,
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
    )
    tokenizer.train_from_iterator(corpus, trainer)
    vocabulary = tokenizer.get_vocab()
    path = tmp_path_factory.mktemp("wordpiece") / "vocab.txt"
    ordered = sorted(vocabulary, key=vocabulary.get)
    # Cased pieces too, so that do_lower_case=False has something to match.
    ordered += [word for word in ("Café", "The", "Python", "JSON") if word not in vocabulary]
    path.write_text("\n".join(ordered) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def sentencepiece_model(tmp_path_factory, corpus):
    import sentencepiece

    prefix = tmp_path_factory.mktemp("sentencepiece") / "spm"
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_prefix=str(prefix),
        vocab_size=400,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        character_coverage=1.0,
        minloglevel=2,
    )
    return str(prefix) + ".model"
