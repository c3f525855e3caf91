"""SentencePiece tokenizer with the same interface as the WordPiece one."""

from keras_attn.tokenizers.base_tokenizer import MODEL_DEFAULT
from keras_attn.tokenizers.base_tokenizer import BaseTokenizer
from keras_attn.tokenizers.base_tokenizer import check_file
from keras_attn.tokenizers.base_tokenizer import check_integer
from keras_attn.tokenizers.base_tokenizer import start_and_end_tokens


def _first_present(vocabulary, *tokens):
    return next((token for token in tokens if token and token in vocabulary), None)


class SpTokenizer(BaseTokenizer):
    r"""SentencePiece tokenizer (Kudo & Richardson, 2018,
    https://arxiv.org/abs/1808.06226) with the `Tokenizer` interface.

    Special tokens are looked up by name: `[CLS]`/`[SEP]`/`[MASK]` where the
    model defines them, else `<s>`/`</s>`/`<mask>`. SentencePiece matches
    user-defined symbols inside text, so a typed `[MASK]` may become the mask
    id. bert4keras's two hooks: `pre_tokenize(text)` returns a list of words,
    and SentencePiece encodes `" ".join(words)` instead (`rematch` then
    raises, `decode` returns the rewritten text); `token_translate` maps
    produced tokens to other pieces of the model before ids, and `decode`
    maps them back first (its targets must be distinct pieces of the model).

    Args:
        model_path: path to a SentencePiece `.model` file; a missing, empty
            or unparsable file raises an error naming it.
        cls_token, sep_token, mask_token: left out, the model's own (see
            above); a piece of the model; or None (or `""`) for none.
        token_start, token_end: bert4keras's names of `cls_token` and
            `sep_token` (give each role once).
        pre_tokenize: None, or a callable from a str to a list of strs.
        token_translate: None, or a dict from token to piece.

    Example:

    >>> tokenizer = keras_attn.SpTokenizer("spm.model")
    >>> token_ids, segment_ids = tokenizer.encode("first text", "second")

    CPM-LM's tokenizer (jieba words, spaces and newlines rewritten, the
    newline encoded as `<cls>`):

    >>> tokenizer = keras_attn.SpTokenizer(
    ...     "chinese_vocab.model", cls_token=None, sep_token=None,
    ...     pre_tokenize=lambda text: [
    ...         word.replace(" ", "\u2582").replace("\n", "\u2583")
    ...         for word in jieba.cut(text)
    ...     ],
    ...     token_translate={"\u2583": "<cls>"},
    ... )
    """

    def __init__(
        self,
        model_path,
        cls_token=MODEL_DEFAULT,
        sep_token=MODEL_DEFAULT,
        mask_token=MODEL_DEFAULT,
        pre_tokenize=None,
        token_translate=None,
        token_start=MODEL_DEFAULT,
        token_end=MODEL_DEFAULT,
    ):
        import sentencepiece

        cls_token, sep_token = start_and_end_tokens(cls_token, sep_token, token_start, token_end)

        model_path = check_file(model_path, "SentencePiece model")
        self.model_path = model_path
        try:
            self._processor = sentencepiece.SentencePieceProcessor(model_file=model_path)
        except (RuntimeError, OSError) as error:
            raise ValueError(
                f"SentencePiece model {model_path!r} could not be read as a "
                f"SentencePiece `.model` file: {error}"
            ) from error
        processor = self._processor
        self._inverse = {i: processor.id_to_piece(i) for i in range(processor.get_piece_size())}
        self._vocab = {piece: i for i, piece in self._inverse.items()}

        def piece(index):
            return processor.id_to_piece(index) if index >= 0 else None

        self._pad = piece(processor.pad_id())
        self._unk = piece(processor.unk_id())
        chosen = {}
        for role, given, defaults in (
            ("cls_token", cls_token, ("[CLS]", piece(processor.bos_id()))),
            ("sep_token", sep_token, ("[SEP]", piece(processor.eos_id()))),
            ("mask_token", mask_token, ("[MASK]", "<mask>")),
        ):
            if given is None or given == "":
                chosen[role] = None
            elif given is MODEL_DEFAULT:
                chosen[role] = _first_present(self._vocab, *defaults)
            else:
                if given not in self._vocab:
                    raise ValueError(
                        f"{role}={given!r} is not a piece of SentencePiece model {model_path!r}."
                    )
                chosen[role] = given
        self._cls = chosen["cls_token"]
        self._sep = chosen["sep_token"]
        self._mask = chosen["mask_token"]
        if pre_tokenize is not None and not callable(pre_tokenize):
            raise TypeError(
                "pre_tokenize must be None or a callable from a str to a list of strs, "
                f"got {type(pre_tokenize).__name__}: {pre_tokenize!r}."
            )
        self._pre_tokenize = pre_tokenize
        self._translate, self._untranslate = self._check_translation(token_translate)

    def _check_translation(self, token_translate):
        """`(token_translate, its inverse)` as dicts, or errors naming the
        entry that is not a str, not a piece of the model, or a repeated
        target (the inverse would be ambiguous)."""
        if token_translate is None:
            return {}, {}
        if not isinstance(token_translate, dict):
            raise TypeError(
                "token_translate must be None or a dict from token to piece, got "
                f"{type(token_translate).__name__}: {token_translate!r}."
            )
        inverse = {}
        for source, target in token_translate.items():
            if not isinstance(source, str) or not isinstance(target, str) or not source:
                raise TypeError(
                    f"token_translate maps non-empty strs to strs; received {source!r}: {target!r}."
                )
            if target not in self._vocab:
                raise ValueError(
                    f"token_translate maps {source!r} to {target!r}, which is not a piece of "
                    f"SentencePiece model {self.model_path!r}."
                )
            if target in inverse:
                raise ValueError(
                    f"token_translate maps both {inverse[target]!r} and {source!r} to "
                    f"{target!r}; decode could not tell which to write back."
                )
            inverse[target] = source
        return dict(token_translate), inverse

    def _sentencepiece_text(self, text):
        """The text SentencePiece encodes: `text`, or its pre-tokenized
        words joined by spaces."""
        if self._pre_tokenize is None:
            return text
        words = self._pre_tokenize(text)
        if isinstance(words, str):
            raise TypeError(
                f"pre_tokenize must return a list of strs; it returned the str {words!r} "
                "(wrap it as a list)."
            )
        if not hasattr(words, "__iter__"):
            raise TypeError(
                f"pre_tokenize must return a list of strs; it returned "
                f"{type(words).__name__} {words!r} for the text {text!r}."
            )
        words = list(words)
        for word in words:
            if not isinstance(word, str):
                raise TypeError(
                    f"pre_tokenize must return a list of strs; it returned {words!r}, with "
                    f"the {type(word).__name__} {word!r}."
                )
        return " ".join(words)

    def _pieces(self, text):
        text = self._sentencepiece_text(text)
        proto = self._processor.encode(text, return_type="proto")
        # SentencePiece reports byte offsets into the UTF-8 text; map them to
        # character offsets of the original string.
        character_at = []
        for index, character in enumerate(text):
            character_at.extend([index] * len(character.encode("utf-8")))
        character_at.append(len(text))
        tokens, spans = [], []
        for piece in proto.pieces:
            tokens.append(self._translate.get(piece.piece, piece.piece))
            spans.append((character_at[piece.begin], character_at[piece.end]))
        return tokens, spans

    def rematch(self, text, tokens=None):
        if self._pre_tokenize is not None:
            raise ValueError(
                "rematch maps tokens back onto the text SentencePiece encoded; with "
                "pre_tokenize that is pre_tokenize's rewrite of `text`, not `text`, so "
                "this tokenizer cannot rematch. Build one without pre_tokenize to rematch."
            )
        return super().rematch(text, tokens)

    rematch.__doc__ = BaseTokenizer.rematch.__doc__

    def decode(self, ids):
        """Text of `ids`, without specials; a ValueError names an id
        outside `[0, vocab_size)`. With `token_translate`, translated
        tokens are written back as the pieces they replaced first (and
        kept, even where they are specials)."""
        if not self._translate:
            kept = [
                check_integer(i, "A token id")
                for i in ids
                if self.id_to_token(i) not in self.special_tokens
            ]
            return self._processor.decode(kept)
        pieces = []
        for token in self.ids_to_tokens(ids):
            if token in self._untranslate:
                pieces.append(self._untranslate[token])
            elif token not in self.special_tokens:
                pieces.append(token)
        return self._processor.decode_pieces(pieces)
