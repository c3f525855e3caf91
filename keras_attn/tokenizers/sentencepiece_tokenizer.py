"""SentencePiece tokenizer with the same interface as the WordPiece one."""

from keras_attn.tokenizers.base_tokenizer import BaseTokenizer
from keras_attn.tokenizers.base_tokenizer import check_file
from keras_attn.tokenizers.base_tokenizer import check_integer


def _first_present(vocabulary, *tokens):
    return next((token for token in tokens if token and token in vocabulary), None)


class SpTokenizer(BaseTokenizer):
    """SentencePiece tokenizer (Kudo & Richardson, 2018,
    https://arxiv.org/abs/1808.06226) with the `Tokenizer` interface.

    Special tokens are looked up by name: `[CLS]`/`[SEP]`/`[MASK]` where the
    model defines them (ALBERT-style), else the model's `<s>`/`</s>`/`<mask>`.
    Pass `cls_token=""` (or `sep_token=""`) to encode without one. Note that
    SentencePiece matches user-defined symbols inside text, so a model that
    defines `[MASK]` as a symbol turns a typed `[MASK]` into the mask id.

    Args:
        model_path: path to a SentencePiece `.model` file; a missing, empty
            or unparsable file raises an error naming it.
        cls_token, sep_token, mask_token: override the special tokens.

    Example:

    >>> tokenizer = keras_attn.SpTokenizer("spm.model")
    >>> token_ids, segment_ids = tokenizer.encode("first text", "second")
    """

    def __init__(self, model_path, cls_token=None, sep_token=None, mask_token=None):
        import sentencepiece

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
            if given == "":
                chosen[role] = None
            elif given is not None:
                if given not in self._vocab:
                    raise ValueError(
                        f"{role}={given!r} is not a piece of SentencePiece model {model_path!r}."
                    )
                chosen[role] = given
            else:
                chosen[role] = _first_present(self._vocab, *defaults)
        self._cls = chosen["cls_token"]
        self._sep = chosen["sep_token"]
        self._mask = chosen["mask_token"]

    def _pieces(self, text):
        proto = self._processor.encode(text, return_type="proto")
        # SentencePiece reports byte offsets into the UTF-8 text; map them to
        # character offsets of the original string.
        character_at = []
        for index, character in enumerate(text):
            character_at.extend([index] * len(character.encode("utf-8")))
        character_at.append(len(text))
        tokens, spans = [], []
        for piece in proto.pieces:
            tokens.append(piece.piece)
            spans.append((character_at[piece.begin], character_at[piece.end]))
        return tokens, spans

    def decode(self, ids):
        """Text of `ids`, without specials; a ValueError names an id
        outside `[0, vocab_size)`."""
        kept = [
            check_integer(i, "A token id")
            for i in ids
            if self.id_to_token(i) not in self.special_tokens
        ]
        return self._processor.decode(kept)
