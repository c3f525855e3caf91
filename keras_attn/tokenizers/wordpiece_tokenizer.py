"""BERT's WordPiece tokenizer on the `tokenizers` package's fast implementation."""

import os
import unicodedata

from keras_attn.tokenizers.base_tokenizer import BaseTokenizer

REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]")


def load_vocabulary(path):
    """Reads a BERT `vocab.txt`: one token a line, ids in line order."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Vocabulary file {path!r} does not exist.")
    vocabulary = {}
    with open(path, encoding="utf-8") as file:
        for line in file:
            token = line.rstrip("\n").rstrip("\r")
            if token and token not in vocabulary:
                vocabulary[token] = len(vocabulary)
    return vocabulary


def _is_cjk(character):
    code = ord(character)
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2FA1F
        or 0xF900 <= code <= 0xFAFF
    )


def _is_punctuation(character):
    return unicodedata.category(character).startswith("P") or (
        character.isascii() and not character.isalnum() and not character.isspace()
    )


class Tokenizer(BaseTokenizer):
    """BERT WordPiece tokenizer with bert4keras's conveniences.

    Normalisation, pre-tokenisation and WordPiece matching are the `tokenizers`
    package's (the implementation behind `transformers.BertTokenizerFast`),
    so ids equal the reference's. Special tokens are never recognised inside
    text: a user typing `[SEP]` gets the tokens `[`, `sep`, `]`, as with
    bert4keras, not the separator id.

    Args:
        vocab_path: path to a BERT `vocab.txt`.
        do_lower_case: lowercase and strip accents, as uncased models expect.
        max_input_chars_per_word: longer words become `[UNK]`.

    Example:

    >>> tokenizer = keras_attn.Tokenizer("vocab.txt")
    >>> token_ids, segment_ids = tokenizer.encode("first text", "second", maxlen=32)
    >>> tokenizer.decode(token_ids)
    """

    def __init__(self, vocab_path, do_lower_case=True, max_input_chars_per_word=100):
        from tokenizers import Tokenizer as FastTokenizer
        from tokenizers import models
        from tokenizers import normalizers
        from tokenizers import pre_tokenizers

        self.vocab_path = vocab_path
        self.do_lower_case = do_lower_case
        self._vocab = load_vocabulary(vocab_path)
        missing = [token for token in REQUIRED_TOKENS if token not in self._vocab]
        if missing:
            raise ValueError(f"Vocabulary {vocab_path!r} lacks the tokens {missing}.")
        self._inverse = {i: token for token, i in self._vocab.items()}
        self._cls, self._sep, self._unk = "[CLS]", "[SEP]", "[UNK]"
        self._pad = "[PAD]" if "[PAD]" in self._vocab else None
        self._mask = "[MASK]" if "[MASK]" in self._vocab else None
        self._fast = FastTokenizer(
            models.WordPiece(
                self._vocab,
                unk_token="[UNK]",
                max_input_chars_per_word=max_input_chars_per_word,
            )
        )
        self._fast.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=True,
            strip_accents=None,  # follows lowercase, as in BERT
            lowercase=do_lower_case,
        )
        self._fast.pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    def _pieces(self, text):
        encoding = self._fast.encode(text, add_special_tokens=False)
        return list(encoding.tokens), list(encoding.offsets)

    def decode(self, ids):
        """Text of `ids`, without specials: word pieces joined, no spaces
        around CJK characters or before punctuation."""
        text = ""
        for token in self.ids_to_tokens(ids):
            if token in self.special_tokens:
                continue
            if token.startswith("##"):
                text += token[2:]
            elif not text or (len(token) == 1 and (_is_cjk(token) or _is_punctuation(token))):
                text += token
            elif _is_cjk(text[-1]):
                text += token if _is_cjk(token[0]) else " " + token
            else:
                text += " " + token
        return text
