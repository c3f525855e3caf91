"""BERT's WordPiece tokenizer on the `tokenizers` package's fast implementation."""

import codecs
import os
import re
import unicodedata
import warnings

from keras_attn.tokenizers.base_tokenizer import MODEL_DEFAULT
from keras_attn.tokenizers.base_tokenizer import BaseTokenizer
from keras_attn.tokenizers.base_tokenizer import check_file
from keras_attn.tokenizers.base_tokenizer import read_json
from keras_attn.tokenizers.base_tokenizer import tokenizer_file
from keras_attn.tokenizers.base_tokenizer import start_and_end_tokens

REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]")

# Characters `decode` writes no space after, as bert4keras does: CJK and
# full-width punctuation (U+3000, the ideographic space, among them), and
# `+-/={(<[`.
NO_SPACE_AFTER = (
    "＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､\u3000、〃〈〉《》"
    "「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏﹑﹔·！？｡。"
    "+-/={(<["
)


def _listed(items, limit=10):
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def load_vocabulary(path):
    """Reads a BERT `vocab.txt` (UTF-8, one token a line) into the list of its
    tokens by id: line `i + 1` has id `i`, always. Trailing whitespace and a
    leading byte-order mark are dropped. A blank line keeps its id as the
    empty token `""`; a repeated token keeps every line's id for
    `id_to_token`, and text maps to its last (`vocabulary_ids`); both warn,
    naming the file and lines. Bytes that are not UTF-8 raise a ValueError
    naming the file, the line and the byte offset."""
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


def load_vocab(path=None, simplified=False, startswith=None, *, dict_path=None):
    """bert4keras's `load_vocab`: the vocabulary of a BERT `vocab.txt`.

    Args:
        path: the `vocab.txt` (read by `load_vocabulary`); bert4keras's
            keyword `dict_path` is the same.
        simplified: drop the tokens WordPiece can never produce from text
            (bert4keras's rule, `_never_produced`).
        startswith: tokens to put first, in this order (e.g. `["[PAD]",
            "[UNK]", "[CLS]", "[SEP]", "[MASK]"]`), kept whatever the rule.

    Returns:
        With `simplified=False`, the dict token -> id. With
        `simplified=True`, `(token_dict, keep_tokens)`: the kept tokens with
        new ids `0..n-1`, and each one's original id, for
        `build_transformer_model(keep_tokens=...)`.

    Raises:
        ValueError: a `startswith` token the vocabulary lacks (named), or
            given twice.
        TypeError: neither or both of `path` and `dict_path`.
    """
    if (path is None) == (dict_path is None):
        raise TypeError(
            "load_vocab takes the vocabulary file once, as `path` or as bert4keras's "
            f"`dict_path`; received path={path!r}, dict_path={dict_path!r}."
        )
    path = dict_path if path is None else path
    tokens = load_vocabulary(path)
    token_dict = vocabulary_ids(tokens)
    if not simplified:
        return token_dict
    startswith = list(startswith or [])
    absent = [token for token in startswith if token not in token_dict]
    if absent:
        raise ValueError(f"load_vocab(startswith=...): {absent} are not in vocabulary {path!r}.")
    if len(set(startswith)) != len(startswith):
        raise ValueError(f"load_vocab(startswith=...) lists a token twice: {startswith}.")
    kept = startswith + [
        token
        for token, _ in sorted(token_dict.items(), key=lambda item: item[1])
        if token not in startswith and not _never_produced(token)
    ]
    return {token: i for i, token in enumerate(kept)}, [token_dict[token] for token in kept]


def _never_produced(token):
    """bert4keras's rule for tokens WordPiece cannot produce: longer than one
    character, with a CJK character or punctuation after any `##` (text is
    split around both)."""
    stem = token[2:] if token.startswith("##") else token
    return len(token) > 1 and any(_is_cjk(c) or _is_punctuation(c) for c in stem)


# BERT's CJK ideograph blocks (the characters its normaliser splits off).
CJK_BLOCKS = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# The printable ASCII characters that are neither letters nor digits, all
# punctuation to BERT (`$`, `^`, `` ` `` are symbols to Unicode).
ASCII_PUNCTUATION_BLOCKS = ((33, 47), (58, 64), (91, 96), (123, 126))


def _in_blocks(character, blocks):
    code = ord(character)
    return any(low <= code <= high for low, high in blocks)


def _is_cjk(character):
    return _in_blocks(character, CJK_BLOCKS)


def _is_punctuation(character):
    """BERT's punctuation: `ASCII_PUNCTUATION_BLOCKS` and Unicode category P*."""
    return _in_blocks(character, ASCII_PUNCTUATION_BLOCKS) or unicodedata.category(
        character
    ).startswith("P")


def _vocabulary_from_dict(token_dict):
    """The list of tokens by id of a dict token -> id, whose ids must be
    exactly 0..n-1; errors name the offending tokens."""
    bad = [(token, i) for token, i in token_dict.items() if not isinstance(i, int) or isinstance(i, bool)]
    if bad or not all(isinstance(token, str) for token in token_dict):
        raise TypeError(f"The token dict must map str tokens to int ids; received e.g. {bad[:3]}.")
    tokens = [None] * len(token_dict)
    for token, i in token_dict.items():
        if not 0 <= i < len(tokens) or tokens[i] is not None:
            raise ValueError(
                f"The token dict's ids must be 0..{len(tokens) - 1}, each once; "
                f"{token!r} has id {i}"
                + (f", as {tokens[i]!r} has." if 0 <= i < len(tokens) else ".")
            )
        tokens[i] = token
    return tokens


def _configured_lowercase(directory):
    """The `do_lower_case` of `directory`'s `tokenizer_config.json` (as
    `transformers` writes it), True when the file or the key is absent."""
    path = os.path.join(directory, "tokenizer_config.json")
    if not os.path.isfile(path):
        return True
    config = read_json(path, "Tokenizer config")
    return bool(config.get("do_lower_case", True)) if isinstance(config, dict) else True


class Tokenizer(BaseTokenizer):
    """BERT WordPiece tokenizer with bert4keras's conveniences.

    Normalisation, pre-tokenisation and WordPiece matching are the
    `tokenizers` package's (behind `transformers.BertTokenizerFast`), so ids
    equal the reference's. Special tokens are never recognised inside text
    (`[SEP]` typed by a user is `[`, `sep`, `]`). A token's id is its line
    number in `vocab.txt` from 0 (see `load_vocabulary`), so `vocab_size` is
    the number of lines.

    Args:
        vocabulary: path to a BERT `vocab.txt` (UTF-8), or a dict token ->
            id with the ids `0..n-1` (bert4keras's `token_dict`).
        do_lower_case: lowercase and strip accents, as uncased models expect.
        max_input_chars_per_word: longer words become `[UNK]`.
        vocab_path: the same as a path `vocabulary` (the earlier keyword).
        cls_token, sep_token: the tokens `encode` puts before the text and
            after each text: `"[CLS]"` and `"[SEP]"` unless given; None for
            none.
        token_start, token_end: bert4keras's names of `cls_token` and
            `sep_token` (give each role once).

    Example:

    >>> tokenizer = keras_attn.Tokenizer("vocab.txt")
    >>> tokenizer = keras_attn.Tokenizer.from_file("bert-dir")  # vocab.txt or tokenizer.json
    >>> token_ids, segment_ids = tokenizer.encode("first text", "second", maxlen=32)
    >>> tokenizer.decode(token_ids)
    """

    def __init__(
        self, vocabulary=None, do_lower_case=True, max_input_chars_per_word=100, vocab_path=None,
        cls_token=MODEL_DEFAULT, sep_token=MODEL_DEFAULT, token_start=MODEL_DEFAULT,
        token_end=MODEL_DEFAULT,
    ):
        from tokenizers import Tokenizer as FastTokenizer
        from tokenizers import models
        from tokenizers import normalizers
        from tokenizers import pre_tokenizers

        # `vocab_path=` is this constructor's earlier keyword, still accepted.
        if vocabulary is not None and vocab_path is not None:
            raise TypeError(
                "Tokenizer: give the vocabulary once, as `vocabulary` (a vocab.txt "
                "path or a token dict) or as `vocab_path`."
            )
        if vocabulary is None:
            vocabulary = vocab_path
        if isinstance(vocabulary, dict):
            self.vocab_path = None
            tokens = _vocabulary_from_dict(vocabulary)
            origin = "The token dict"
        else:
            self.vocab_path = vocabulary
            tokens = load_vocabulary(vocabulary)
            origin = f"Vocabulary {vocabulary!r}"
        self.do_lower_case = do_lower_case
        self._vocab = vocabulary_ids(tokens)
        cls_token, sep_token = start_and_end_tokens(cls_token, sep_token, token_start, token_end)
        self._cls = "[CLS]" if cls_token is MODEL_DEFAULT else cls_token
        self._sep = "[SEP]" if sep_token is MODEL_DEFAULT else sep_token
        self._unk = "[UNK]"
        required = [token for token in (self._unk, self._cls, self._sep) if token is not None]
        missing = [token for token in required if token not in self._vocab]
        if missing:
            raise ValueError(f"{origin} lacks the tokens {missing}.")
        self._inverse = dict(enumerate(tokens))
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

    @classmethod
    def from_file(cls, path, do_lower_case=None):
        """A `Tokenizer` from a `vocab.txt`, a WordPiece `tokenizer.json`, or a
        directory holding either (its `vocab.txt` when both). Lowercasing:
        `do_lower_case` when given; else a `tokenizer.json`'s `BertNormalizer`
        settings; else the `do_lower_case` of the `tokenizer_config.json` beside
        the `vocab.txt`, True when there is none.

        Raises:
            FileNotFoundError: `path` does not exist, or the directory holds
                neither file.
            ValueError: a `tokenizer.json` that is not BERT's WordPiece, or lacks
                `[UNK]`, `[CLS]` or `[SEP]` (the message names the file).
        """
        path = tokenizer_file(path, [
            ("vocab.txt", "vocab.txt"), ("tokenizer.json", "tokenizer.json"),
        ])
        if path.endswith(".json"):
            return cls._from_tokenizer_json(path, do_lower_case)
        if do_lower_case is None:
            do_lower_case = _configured_lowercase(os.path.dirname(path))
        return cls(path, do_lower_case=do_lower_case)

    @classmethod
    def _from_tokenizer_json(cls, path, do_lower_case):
        from tokenizers import normalizers

        path = check_file(path, "Tokenizer file")
        description = read_json(path, "Tokenizer file")
        model = description.get("model") if isinstance(description, dict) else None
        if not isinstance(model, dict) or model.get("type") != "WordPiece":
            found = model.get("type") if isinstance(model, dict) else None
            hint = " (a byte-level BPE reads with keras_attn.BpeTokenizer.from_file)" if found == "BPE" else ""
            raise ValueError(
                f"Tokenizer file {path!r} does not describe a WordPiece model: its model "
                f"type is {found!r}{hint}."
            )
        normalizer = description.get("normalizer")
        pre_tokenizer = description.get("pre_tokenizer")
        for step, value, expected in (
            ("normalizer", normalizer, "BertNormalizer"),
            ("pre_tokenizer", pre_tokenizer, "BertPreTokenizer"),
        ):
            found = value.get("type") if isinstance(value, dict) else value
            if found != expected:
                raise ValueError(
                    f"Tokenizer file {path!r} has the {step} {found!r}; keras_attn.Tokenizer "
                    f"is BERT's WordPiece, with a {expected}."
                )
        if model.get("continuing_subword_prefix", "##") != "##":
            raise ValueError(
                f"Tokenizer file {path!r} marks word pieces with "
                f"{model['continuing_subword_prefix']!r}; BERT's WordPiece uses '##'."
            )
        vocabulary = dict(model.get("vocab") or {})
        for added in description.get("added_tokens") or []:
            vocabulary.setdefault(added["content"], added["id"])
        missing = [token for token in REQUIRED_TOKENS if token not in vocabulary]
        if missing:
            raise ValueError(f"Tokenizer file {path!r} lacks the tokens {missing}.")
        settings = {
            key: normalizer.get(key, default)
            for key, default in (
                ("clean_text", True), ("handle_chinese_chars", True), ("strip_accents", None),
                ("lowercase", True),
            )
        }
        if do_lower_case is not None:
            settings["lowercase"] = do_lower_case
        tokenizer = cls(
            vocabulary, do_lower_case=settings["lowercase"],
            max_input_chars_per_word=model.get("max_input_chars_per_word", 100),
        )
        tokenizer.vocab_path = path
        tokenizer._fast.normalizer = normalizers.BertNormalizer(**settings)
        return tokenizer

    def _pieces(self, text):
        encoding = self._fast.encode(text, add_special_tokens=False)
        return list(encoding.tokens), list(encoding.offsets)

    def decode(self, ids):
        """Text of `ids`, without specials, joined by bert4keras's rules:
        `##` pieces glued to the piece before; no space between CJK
        characters, nor after one; no space before punctuation, nor after
        CJK punctuation or `+-/={(<[`; `it ' s` -> `it's` (also `'re`,
        `'m`, `'t`, `'ve`, `'d`, `'ll`) and `3 . 5` -> `3.5`. Unlike
        bert4keras, a contraction at the very end is joined too."""
        text = ""
        for token in self.ids_to_tokens(ids):
            if not token or token in self.special_tokens:
                continue
            if token.startswith("##"):
                text += token[2:]
            elif len(token) == 1 and _is_cjk(token):
                text += token
            elif len(token) == 1 and _is_punctuation(token):
                text += token + " "
            elif text and _is_cjk(text[-1]):
                text += token
            else:
                text += " " + token
        # The trailing space lets the rules below match at the very end.
        text = re.sub(" +", " ", text) + " "
        text = re.sub(r"' (re|m|s|t|ve|d|ll) ", r"'\1 ", text)
        text = re.sub(f"([{re.escape(NO_SPACE_AFTER)}]) ", r"\1", text)
        text = re.sub(r"(\d\.) (\d)", r"\1\2", text)
        return text.strip()
