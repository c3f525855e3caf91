"""GPT-2's byte-level BPE tokenizer on the `tokenizers` package."""

import os

from keras_attn.tokenizers.base_tokenizer import BaseTokenizer
from keras_attn.tokenizers.base_tokenizer import check_file
from keras_attn.tokenizers.base_tokenizer import read_json
from keras_attn.tokenizers.base_tokenizer import vocabulary_of

END_TOKEN = "<|endoftext|>"


def byte_to_character():
    """GPT-2's table byte -> printable character (`bytes_to_unicode` in its
    `encoder.py`): printable Latin-1 bytes stand for themselves, the other
    68 for the characters from U+0100 on, in byte order."""
    printable = (
        set(range(ord("!"), ord("~") + 1))
        | set(range(ord("¡"), ord("¬") + 1))
        | set(range(ord("®"), ord("ÿ") + 1))
    )
    table, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


def _missing_bytes(vocabulary):
    """The bytes whose character is not a token of `vocabulary` (a BPE
    without them cannot encode every text)."""
    return [byte for byte, character in byte_to_character().items() if character not in vocabulary]


def _byte_level_steps(pre_tokenizer):
    """The ByteLevel steps of a `tokenizer.json` pre-tokenizer, also inside
    a Sequence."""
    if isinstance(pre_tokenizer, list):
        return [step for item in pre_tokenizer for step in _byte_level_steps(item)]
    if not isinstance(pre_tokenizer, dict):
        return []
    if pre_tokenizer.get("type") == "ByteLevel":
        return [pre_tokenizer]
    return _byte_level_steps(pre_tokenizer.get("pretokenizers"))


def load_bpe_vocabulary(path):
    """Reads a GPT-2 `vocab.json` (a JSON object token -> id, the ids exactly
    `0..n-1`) into the list of its tokens by id; errors name the file."""
    path = check_file(path, "BPE vocabulary file")
    vocabulary = read_json(path, "BPE vocabulary file")
    if not isinstance(vocabulary, dict):
        raise ValueError(
            f"BPE vocabulary file {path!r} must hold a JSON object token -> id, "
            f"found a JSON {type(vocabulary).__name__}."
        )
    tokens = [None] * len(vocabulary)
    for token, token_id in vocabulary.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id < len(tokens):
            raise ValueError(
                f"BPE vocabulary file {path!r}: token {token!r} has id {token_id!r}; "
                f"the ids must be the integers 0..{len(tokens) - 1}, each once."
            )
        if tokens[token_id] is not None:
            raise ValueError(
                f"BPE vocabulary file {path!r}: tokens {tokens[token_id]!r} and {token!r} "
                f"share id {token_id}."
            )
        tokens[token_id] = token
    missing = _missing_bytes(vocabulary)
    if missing:
        raise ValueError(
            f"BPE vocabulary file {path!r} is not a byte-level vocabulary: it lacks "
            f"the tokens of {len(missing)} of the 256 bytes (e.g. byte {missing[0]:#04x}, "
            f"token {byte_to_character()[missing[0]]!r})."
        )
    return tokens


def load_merges(path, vocabulary):
    """Reads a GPT-2 `merges.txt` (an optional `#version` line, then one
    merge `left right` a line, in priority order) into a list of pairs;
    errors name the file, the line and the token `vocabulary` lacks."""
    path = check_file(path, "BPE merges file")
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().split("\n")
    except UnicodeDecodeError as error:
        raise ValueError(f"BPE merges file {path!r} is not UTF-8: {error}.") from None
    merges = []
    for number, line in enumerate(lines, start=1):
        if number == 1 and line.startswith("#version"):
            continue
        if not line.strip():
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(
                f"BPE merges file {path!r}, line {number}: expected two tokens "
                f"separated by one space, found {line!r}."
            )
        for token in (parts[0], parts[1], parts[0] + parts[1]):
            if token not in vocabulary:
                raise ValueError(
                    f"BPE merges file {path!r}, line {number} ({line!r}): the token "
                    f"{token!r} is not in the vocabulary."
                )
        merges.append((parts[0], parts[1]))
    return merges


class BpeTokenizer(BaseTokenizer):
    """GPT-2's byte-level BPE tokenizer (Radford et al., 2019): words cut by
    GPT-2's pattern, their UTF-8 bytes written as printable characters (a
    space is `Ġ`) and merged by the BPE merges, by the `tokenizers` package,
    so ids and offsets equal `transformers.GPT2TokenizerFast`'s.

    Every text is representable (no unknown token):
    `decode(encode(text)[0], skip_special_tokens=False) == text` with
    `add_prefix_space=False`. Only `<|endoftext|>` is special (in a
    `tokenizer.json`, also added tokens marked special); typed inside a text
    it becomes that single id. `encode(first, second=None, maxlen=None)` adds
    no special tokens: the ids of `first` then `second`, segment ids 0 then
    1, at most `maxlen` in all. `from_file` loads a `tokenizer.json` as it
    stands, or a directory. Missing, empty or malformed files raise errors
    naming the file (and, for `merges.txt`, the line).

    Args:
        vocab_path: path to the `vocab.json` (token -> id, ids `0..n-1`, all
            256 byte tokens present).
        merges_path: path to the `merges.txt`.
        add_prefix_space: encode a text as if it began with a space, so its
            first word gets the same ids as inside a sentence.

    Example:

    >>> tokenizer = keras_attn.BpeTokenizer("vocab.json", "merges.txt")
    >>> token_ids, segment_ids = tokenizer.encode("Hello world")
    >>> tokenizer.decode(token_ids + [tokenizer.end_id])
    'Hello world'

    Reference: https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf
    """

    def __init__(self, vocab_path, merges_path, add_prefix_space=False):
        from tokenizers import Tokenizer as FastTokenizer
        from tokenizers import decoders
        from tokenizers import models
        from tokenizers import pre_tokenizers

        tokens = load_bpe_vocabulary(vocab_path)
        vocabulary = {token: i for i, token in enumerate(tokens)}
        merges = load_merges(merges_path, vocabulary)
        self.vocab_path = os.fspath(vocab_path)
        self.merges_path = os.fspath(merges_path)
        self.add_prefix_space = add_prefix_space
        fast = FastTokenizer(models.BPE(vocabulary, merges, fuse_unk=False))
        fast.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
        fast.decoder = decoders.ByteLevel()
        if END_TOKEN in vocabulary:
            fast.add_special_tokens([END_TOKEN])
        self._setup(fast)

    @classmethod
    def from_file(cls, path):
        """A `BpeTokenizer` from a `tokenizer.json` or from a directory holding
        `tokenizer.json` or `vocab.json` and `merges.txt` (see the class)."""
        if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
            directory = os.fspath(path)
            if os.path.isfile(os.path.join(directory, "tokenizer.json")):
                path = os.path.join(directory, "tokenizer.json")
            elif all(os.path.isfile(os.path.join(directory, name)) for name in ("vocab.json", "merges.txt")):
                return cls(os.path.join(directory, "vocab.json"), os.path.join(directory, "merges.txt"))
            else:
                raise FileNotFoundError(
                    f"Directory {directory!r} holds neither a tokenizer.json nor a "
                    "vocab.json with a merges.txt."
                )
        from tokenizers import Tokenizer as FastTokenizer

        path = check_file(path, "Tokenizer file")
        description = read_json(path, "Tokenizer file")
        model = description.get("model") if isinstance(description, dict) else None
        if not isinstance(model, dict) or model.get("type") != "BPE":
            found = model.get("type") if isinstance(model, dict) else None
            raise ValueError(
                f"Tokenizer file {path!r} does not describe a BPE model (its "
                f"model type is {found!r})."
            )
        byte_level = _byte_level_steps(description.get("pre_tokenizer"))
        if not byte_level:
            raise ValueError(
                f"Tokenizer file {path!r} is not byte-level: its pre-tokenizer "
                "has no ByteLevel step."
            )
        missing = _missing_bytes(model.get("vocab") or {})
        if missing:
            raise ValueError(
                f"Tokenizer file {path!r} is not a byte-level vocabulary: it lacks "
                f"the tokens of {len(missing)} of the 256 bytes (e.g. byte {missing[0]:#04x})."
            )
        try:
            fast = FastTokenizer.from_file(path)
        except Exception as error:  # the tokenizers package raises plain Exception
            raise ValueError(f"Tokenizer file {path!r} could not be loaded: {error}") from None
        tokenizer = cls.__new__(cls)
        tokenizer.vocab_path = path
        tokenizer.merges_path = None
        tokenizer.add_prefix_space = any(step.get("add_prefix_space") for step in byte_level)
        tokenizer._setup(fast)
        return tokenizer

    def _setup(self, fast):
        self._fast = fast
        self._vocab, self._inverse = vocabulary_of(fast, self.vocab_path)
        added = fast.get_added_tokens_decoder()
        self._added = {token.content for token in added.values()}
        self._special = {token.content for token in added.values() if token.special}
        self._cls = self._sep = self._unk = self._mask = None
        self._end = END_TOKEN if END_TOKEN in self._vocab else None
        self._pad = self._end
        self._character_to_byte = {character: byte for byte, character in byte_to_character().items()}

    @property
    def end_id(self):
        """The id of `<|endoftext|>`, GPT-2's end of document (also its start
        and padding token); a ValueError where the vocabulary lacks it."""
        return self._special_id("_end", "<|endoftext|> end")

    @property
    def special_tokens(self):
        return set(self._special) | ({self._end} if self._end else set())

    def _pieces(self, text):
        encoding = self._fast.encode(text, add_special_tokens=False)
        return list(encoding.tokens), list(encoding.offsets)

    def decode(self, ids, skip_special_tokens=True):
        """The text of `ids`: their bytes decoded as UTF-8 (a character cut off
        gives U+FFFD).

        Args:
            ids: token ids (ints, a NumPy array or a backend tensor); a
                ValueError names one outside `[0, vocab_size)`.
            skip_special_tokens: leave out `<|endoftext|>` and the other special
                tokens (the default); False writes them as text.
        """
        special = self.special_tokens if skip_special_tokens else set()
        data = bytearray()
        for token_id in ids:
            token = self.id_to_token(token_id)
            if token in special:
                continue
            if token in self._added:
                data += token.encode("utf-8")
                continue
            for character in token:
                byte = self._character_to_byte.get(character)
                # A tokenizer.json may hold tokens outside the byte alphabet.
                data += character.encode("utf-8") if byte is None else bytes([byte])
        return data.decode("utf-8", errors="replace")
