"""What the WordPiece and SentencePiece tokenizers share: special tokens,
sentence pairs, truncation and the id helpers."""


def truncate_pair(first, second, budget):
    """Pops tokens off the end of the longer sequence (the first on ties)
    until both fit in `budget`, as bert4keras does."""
    first, second = list(first), list(second)
    while len(first) + len(second) > budget:
        longer = first if len(first) >= len(second) else second
        longer.pop()
    return first, second


class BaseTokenizer:
    """Sentence-pair encoding on top of a subclass's `_pieces(text)`, which
    returns `(tokens, character_spans)` for plain text, specials never
    produced from text.

    Subclasses set `_vocab` (token -> id), `_inverse` (id -> token) and the
    special token strings `_cls`, `_sep`, `_pad`, `_unk`, `_mask` (`None`
    where the vocabulary has no such token).
    """

    def _pieces(self, text):
        raise NotImplementedError

    # Special tokens --------------------------------------------------------

    def _special_id(self, attribute, role):
        token = getattr(self, attribute)
        if token is None:
            raise ValueError(f"This tokenizer's vocabulary has no {role} token.")
        return self._vocab[token]

    @property
    def vocab_size(self):
        return len(self._vocab)

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
        return self._vocab.get(token, self._vocab[self._unk] if self._unk else None)

    def id_to_token(self, token_id):
        return self._inverse[int(token_id)]

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

    def tokenize(self, text, maxlen=None):
        """Tokens of `text` with the start and end specials."""
        tokens, _ = self._pieces(text)
        if maxlen is not None:
            tokens, _ = truncate_pair(tokens, [], maxlen - self._special_count(False))
        return self._wrap(tokens, None)[0]

    def _special_count(self, pair):
        return bool(self._cls) + bool(self._sep) * (2 if pair else 1)

    def encode(self, first, second=None, maxlen=None):
        """Token ids and segment ids of a text or a text pair.

        Args:
            first: the first text.
            second: optional second text (segment 1).
            maxlen: total length including specials; the longer text loses
                tokens from its end until the pair fits.

        Returns:
            `(token_ids, segment_ids)`, two lists of ints.
        """
        first_tokens, _ = self._pieces(first)
        second_tokens = self._pieces(second)[0] if second is not None else None
        if maxlen is not None:
            budget = maxlen - self._special_count(second is not None)
            if budget < 0:
                raise ValueError(f"maxlen={maxlen} leaves no room for the special tokens.")
            first_tokens, truncated = truncate_pair(first_tokens, second_tokens or [], budget)
            if second_tokens is not None:
                second_tokens = truncated
        tokens, segments = self._wrap(first_tokens, second_tokens)
        return self.tokens_to_ids(tokens), segments

    def rematch(self, text, tokens=None):
        """For every token of `tokenize(text)`, the list of indices of the
        characters of the original `text` it came from (`[]` for specials).

        Args:
            text: the original text.
            tokens: optional, the tokens to map; must equal `tokenize(text)`.
        """
        pieces, spans = self._pieces(text)
        expected, _ = self._wrap(pieces, None)
        if tokens is not None and list(tokens) != expected:
            raise ValueError(
                "`tokens` are not the tokenization of `text`; rematch maps "
                "tokenize(text) back onto text."
            )
        mapping = [list(range(start, end)) for start, end in spans]
        if self._cls:
            mapping.insert(0, [])
        if self._sep:
            mapping.append([])
        return mapping
