"""BERT's WordPiece tokenizer on the `tokenizers` package's fast implementation."""

import codecs
import unicodedata
import warnings

from keras_attn.tokenizers.base_tokenizer import BaseTokenizer
from keras_attn.tokenizers.base_tokenizer import check_file

REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]")


def _listed(items, limit=10):
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def load_vocabulary(path):
    """Reads a BERT `vocab.txt` (UTF-8, one token a line) into the list of
    its tokens by id: the token on line `i + 1` has id `i`, always, as in
    BERT, `BertTokenizerFast` and the embedding rows.

    Trailing whitespace (a carriage return included) is dropped, as
    `BertTokenizerFast` does; a leading UTF-8 byte-order mark is ignored.
    A blank line keeps its id as the empty token `""`, which no text
    produces. A token on several lines keeps every line's id for
    `id_to_token`; text maps to its last line's id, as in BERT and
    `BertTokenizerFast` (see `vocabulary_ids`). Both cases warn, naming the
    file and the lines. Bytes that are not UTF-8 raise a ValueError naming
    the file, the line and the byte offset.
    """
    path = check_file(path, "Vocabulary file")
    with open(path, "rb") as file:
        data = file.read()
    offset = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    lines = data[offset:].split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the final newline ends the last line
    tokens = []
    for number, line in enumerate(lines, start=1):
        try:
            tokens.append(line.decode("utf-8").rstrip())
        except UnicodeDecodeError as error:
            raise ValueError(
                f"Vocabulary file {path!r} is not UTF-8: line {number} has the "
                f"byte {line[error.start]:#04x} at byte offset "
                f"{offset + error.start} of the file ({error.reason}). BERT "
                "vocabularies are UTF-8; convert the file, e.g. with "
                "`iconv -f latin1 -t utf-8`."
            ) from None
        offset += len(line) + 1

    blank = [f"line {i + 1} (id {i})" for i, token in enumerate(tokens) if not token]
    if blank:
        warnings.warn(
            f"Vocabulary file {path!r} has blank lines: {_listed(blank)}. Each "
            "keeps its id as an empty placeholder token that no text produces, "
            "so the ids of later lines still equal their line numbers.",
            stacklevel=3,
        )
    lines_of = {}
    for i, token in enumerate(tokens):
        if token:
            lines_of.setdefault(token, []).append(i)
    repeated = [
        f"{token!r} on lines {', '.join(str(i + 1) for i in ids)} (maps to id {ids[-1]})"
        for token, ids in lines_of.items()
        if len(ids) > 1
    ]
    if repeated:
        warnings.warn(
            f"Vocabulary file {path!r} repeats tokens: {_listed(repeated)}. Text "
            "maps to the last line's id, as BERT and BertTokenizerFast do; "
            "every line keeps its own id.",
            stacklevel=3,
        )
    return tokens


def vocabulary_ids(tokens):
    """Token -> id for a list of tokens by id: a repeated token maps to its
    last id, blank placeholders to none."""
    return {token: i for i, token in enumerate(tokens) if token}


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

    The id of a token is its line number in `vocab.txt` counting from 0,
    even past blank or repeated lines (see `load_vocabulary`), so
    `vocab_size` is the number of lines: the number of embedding rows.

    Args:
        vocab_path: path to a BERT `vocab.txt` (UTF-8).
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
        tokens = load_vocabulary(vocab_path)
        self._vocab = vocabulary_ids(tokens)
        missing = [token for token in REQUIRED_TOKENS if token not in self._vocab]
        if missing:
            raise ValueError(f"Vocabulary {vocab_path!r} lacks the tokens {missing}.")
        self._inverse = dict(enumerate(tokens))
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
            if not token or token in self.special_tokens:
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
