"""What the WordPiece and SentencePiece tokenizers share: input checks,
special tokens, sentence pairs, truncation and the id helpers."""

import json
import operator
import os
import unicodedata


class _ModelDefault:
    """The default of a tokenizer's `cls_token`/`sep_token`: the model's
    own token (None and "" mean no token)."""

    def __repr__(self):
        return "MODEL_DEFAULT"


MODEL_DEFAULT = _ModelDefault()


def start_and_end_tokens(cls_token, sep_token, token_start, token_end):
    """`(cls_token, sep_token)` of a tokenizer given its own keywords and
    bert4keras's `token_start`/`token_end`, which mean the same (None:
    add no such token, as in bert4keras). Each is `MODEL_DEFAULT` when not
    given; "" is None. Giving one role under both names is a TypeError."""
    chosen = []
    for own, own_name, alias, alias_name in (
        (cls_token, "cls_token", token_start, "token_start"),
        (sep_token, "sep_token", token_end, "token_end"),
    ):
        if own is not MODEL_DEFAULT and alias is not MODEL_DEFAULT:
            raise TypeError(
                f"Give the token once: `{own_name}` or bert4keras's `{alias_name}` "
                f"(received {own_name}={own!r} and {alias_name}={alias!r})."
            )
        token = alias if own is MODEL_DEFAULT else own
        chosen.append(None if token == "" else token)
    return tuple(chosen)


def check_file(path, description):
    """Returns `path` as a str after checking that it names a non-empty
    file; errors name `description` (e.g. "Vocabulary file") and the path."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"{description} path must be a str or os.PathLike, got "
            f"{type(path).__name__}: {path!r}."
        )
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{description} {path!r} does not exist.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{description} {path!r} is not a file.")
    if os.path.getsize(path) == 0:
        raise ValueError(f"{description} {path!r} is empty (0 bytes).")
    return path


def tokenizer_file(path, files):
    """`path` as a str, or where it is a folder the first of `files`
    (`(file name, how a message names it)` pairs, in order of preference)
    that it holds; a FileNotFoundError naming them when it holds none."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return path
    for name, _ in files:
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    wanted = " nor a ".join(description for _, description in files)
    raise FileNotFoundError(f"Directory {path!r} holds no tokenizer: neither a {wanted}.")


def read_json(path, description):
    """The JSON document in `path`; a ValueError naming `description` and
    the path when it is not UTF-8 JSON."""
    with open(path, encoding="utf-8") as file:
        try:
            return json.load(file)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{description} {path!r} is not valid UTF-8 JSON: {error}.") from None


def check_text(text, argument):
    """Raises a TypeError naming `argument` unless `text` is a str."""
    if not isinstance(text, str):
        shown = repr(text)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(
            f"`{argument}` must be a str, got {type(text).__name__}: {shown}. "
            "Decode bytes first (`data.decode('utf-8')`) and pass texts one "
            "at a time."
        )


def check_integer(value, description):
    """`value` as an int: Python and NumPy integers and integer scalar
    tensors of every backend; a TypeError naming `description` otherwise
    (floats and bools included)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{description} must be an integer, got {type(value).__name__}: {value!r}."
        ) from None


def vocabulary_of(fast, source):
    """`(token -> id, id -> token)` of a `tokenizers.Tokenizer`, added tokens
    included; a ValueError naming `source` (the file it was read from) when
    its ids are not `0..n-1`."""
    vocabulary = fast.get_vocab(with_added_tokens=True)
    inverse = {i: token for token, i in vocabulary.items()}
    absent = next((i for i in range(len(inverse)) if i not in inverse), None)
    if absent is not None:
        raise ValueError(
            f"Tokenizer file {source!r} has no token with id {absent}; its ids must "
            f"be 0..{len(inverse) - 1}."
        )
    return vocabulary, inverse


def truncate_pair(first, second, budget):
    """Pops tokens off the end of the longer sequence (the first on ties)
    until both fit in `budget` (>= 0), as bert4keras does."""
    first, second = list(first), list(second)
    while len(first) + len(second) > budget:
        longer = first if len(first) >= len(second) else second
        longer.pop()
    return first, second


def attach_combining_marks(text, mapping):
    """Adds to `mapping` (token position -> character indices) each combining
    mark of `text` (Unicode category M*) that no token covers, giving it to
    the token that holds the character it combines with. Normalisers that
    strip accents drop such marks from the token offsets."""
    owner = {}
    for position, indices in enumerate(mapping):
        for index in indices:
            owner.setdefault(index, position)
    previous_owner = None
    for index, character in enumerate(text):
        if index in owner:
            previous_owner = owner[index]
        elif previous_owner is not None and unicodedata.category(character).startswith("M"):
            mapping[previous_owner].append(index)
        else:
            previous_owner = None
    return mapping


class BaseTokenizer:
    """Sentence-pair encoding on top of a subclass's `_pieces(text)`, which
    returns `(tokens, character_spans)` for plain text, specials never
    produced from text.

    Subclasses set `_vocab` (token -> id), `_inverse` (id -> token, one
    entry for every id from 0 to `vocab_size - 1`) and the special token
    strings `_cls`, `_sep`, `_pad`, `_unk`, `_mask` (`None` where the
    vocabulary has no such token).

    Every public method checks its inputs: texts must be `str` (TypeError),
    ids must be integers in `[0, vocab_size)` (ValueError), and `maxlen`
    must be an integer at least the number of special tokens, and at least 1
    (ValueError).
    """

    def _pieces(self, text):
        raise NotImplementedError

    def _text_pieces(self, text, argument):
        check_text(text, argument)
        return self._pieces(text)

    # Special tokens --------------------------------------------------------

    def _special_id(self, attribute, role):
        token = getattr(self, attribute)
        if token is None:
            raise ValueError(f"This tokenizer's vocabulary has no {role} token.")
        return self._vocab[token]

    @property
    def vocab_size(self):
        """The number of ids (embedding rows): one more than the largest id."""
        return len(self._inverse)

    @property
    def pad_id(self):
        return self._special_id("_pad", "padding")

    @property
    def unk_id(self):
        return self._special_id("_unk", "unknown")

    @property
    def cls_id(self):
        return self._special_id("_cls", "[CLS]/start")

    @property
    def sep_id(self):
        return self._special_id("_sep", "[SEP]/end")

    @property
    def mask_id(self):
        return self._special_id("_mask", "mask")

    @property
    def special_tokens(self):
        return {
            t for t in (self._cls, self._sep, self._pad, self._unk, self._mask) if t
        }

    # Ids ---------------------------------------------------------------------

    def token_to_id(self, token):
        check_text(token, "token")
        return self._vocab.get(token, self._vocab[self._unk] if self._unk else None)

    def id_to_token(self, token_id):
        """The token of `token_id`; a ValueError names an id outside
        `[0, vocab_size)`, a TypeError an id that is not an integer."""
        token_id = check_integer(token_id, "A token id")
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(
                f"Token id {token_id} is out of range: the vocabulary has "
                f"{self.vocab_size} ids, 0 to {self.vocab_size - 1}."
            )
        return self._inverse[token_id]

    def tokens_to_ids(self, tokens):
        return [self.token_to_id(token) for token in tokens]

    def ids_to_tokens(self, ids):
        return [self.id_to_token(i) for i in ids]

    # Encoding ----------------------------------------------------------------

    def _wrap(self, first, second):
        """`[CLS] first [SEP] second [SEP]` and segment ids 0 then 1, with the
        specials this vocabulary has."""
        start = [self._cls] if self._cls else []
        end = [self._sep] if self._sep else []
        tokens = start + first + end
        segments = [0] * len(tokens)
        if second is not None:
            tokens += second + end
            segments += [1] * (len(second) + len(end))
        return tokens, segments

    def _text_budget(self, maxlen, pair):
        """How many text tokens fit in `maxlen` beside the special tokens
        (`None` for no limit); errors name maxlen and its minimum."""
        if maxlen is None:
            return None
        specials = bool(self._cls) + bool(self._sep) * (2 if pair else 1)
        maxlen = check_integer(maxlen, "maxlen (or None)")
        minimum = max(specials, 1)
        if maxlen < minimum:
            raise ValueError(
                f"maxlen={maxlen} is too small: the minimum is {minimum}, room "
                f"for the {specials} special tokens of "
                f"{'a text pair' if pair else 'one text'}."
            )
        return maxlen - specials

    def tokenize(self, text, maxlen=None):
        """Tokens of `text` with the start and end specials; at most
        `maxlen` tokens in all, text tokens dropped from the end."""
        budget = self._text_budget(maxlen, pair=False)
        tokens, _ = self._text_pieces(text, "text")
        if budget is not None:
            tokens, _ = truncate_pair(tokens, [], budget)
        return self._wrap(tokens, None)[0]

    def encode(self, first, second=None, maxlen=None):
        """Token ids and segment ids of a text or a text pair.

        Args:
            first: the first text, a str.
            second: optional second text (segment 1), a str.
            maxlen: total length including specials; the longer text loses
                tokens from its end until the pair fits. At least the number
                of special tokens (and at least 1).

        Returns:
            `(token_ids, segment_ids)`, two lists of ints, at most `maxlen`
            long.
        """
        budget = self._text_budget(maxlen, pair=second is not None)
        first_tokens, _ = self._text_pieces(first, "first")
        second_tokens = None
        if second is not None:
            second_tokens, _ = self._text_pieces(second, "second")
        if budget is not None:
            first_tokens, truncated = truncate_pair(first_tokens, second_tokens or [], budget)
            if second_tokens is not None:
                second_tokens = truncated
        tokens, segments = self._wrap(first_tokens, second_tokens)
        return self.tokens_to_ids(tokens), segments

    def rematch(self, text, tokens=None):
        """For every token of `tokenize(text)` (or of `tokens`), the sorted
        list of indices of the characters of the original `text` it came
        from (`[]` for specials). Combining marks (accents of decomposed
        text) belong to the token of the character they combine with, also
        where the tokenizer strips them.

        Args:
            text: the original text.
            tokens: optional, the tokens to map: `tokenize(text)` or
                `tokenize(text, maxlen)`, i.e. the first text tokens of
                `text`, with or without the start and end specials.

        Raises:
            ValueError: `tokens` are not such a prefix of the tokenization
                of `text` (the message gives the first token that differs).
        """
        pieces, spans = self._text_pieces(text, "text")
        mapping = attach_combining_marks(
            text, [list(range(start, end)) for start, end in spans]
        )
        if tokens is None:
            tokens = self._wrap(pieces, None)[0]
        tokens = list(tokens)
        start = 1 if self._cls and tokens[:1] == [self._cls] else 0
        end = len(tokens) - 1 if self._sep and len(tokens) > start and tokens[-1] == self._sep else len(tokens)
        given = tokens[start:end]
        differs = next(
            (i for i, token in enumerate(given) if i >= len(pieces) or pieces[i] != token),
            None,
        )
        if differs is not None:
            expected = pieces[differs] if differs < len(pieces) else "nothing"
            raise ValueError(
                f"`tokens` are not the tokenization of `text`: token {start + differs} "
                f"is {given[differs]!r} where tokenize(text) has {expected!r}; rematch "
                "maps tokenize(text) (truncated or not) back onto text."
            )
        return [[] for _ in range(start)] + mapping[: len(given)] + [[] for _ in range(len(tokens) - end)]
