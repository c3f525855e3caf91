"""T5's tokenizer: SentencePiece, `</s>` after each text, and sentinel ids."""

import re

from keras_attn.tokenizers.base_tokenizer import check_integer
from keras_attn.tokenizers.sentencepiece_tokenizer import SpTokenizer

# The characters the `tokenizers` package splits words on (Rust's
# `char::is_whitespace`, Unicode White_Space). `T5TokenizerFast` splits on
# them after SentencePiece's normalisation; SentencePiece itself splits on
# the space only.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(code) for code in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)


class T5Tokenizer(SpTokenizer):
    """T5's tokenizer (Raffel et al., 2020): a SentencePiece model with `</s>`
    appended to every text and `extra_ids` sentinels after the model's
    pieces, in reverse (`<extra_id_0>` has the largest id, `vocab_size -
    1`). Ids equal `transformers.T5TokenizerFast`'s; mT5 uses it with its own
    model.

    The sentinels and `<pad>`, `</s>`, `<unk>` are recognised inside text as
    single tokens (an `<extra_id_N>` with `N >= extra_ids` is plain text).
    `encode(first, second=None, maxlen=None)` returns `first </s>` (then
    `second </s>`) with segment ids 0, then 1 for the second; with `maxlen`
    the texts lose tokens from their end and keep their `</s>`. `decode`
    leaves out `<pad>`, `</s>` and `<unk>` unless `skip_special_tokens=False`
    and always writes the sentinels.

    Args:
        model_path: path to a SentencePiece model such as T5's
            `spiece.model`; a missing, empty or unparsable file, one without
            an eos piece or one that already has a sentinel raises an error
            naming it.
        extra_ids: how many sentinel tokens to add (T5 and mT5: 100).

    Example:

    >>> tokenizer = keras_attn.T5Tokenizer("spiece.model")
    >>> token_ids, _ = tokenizer.encode("The <extra_id_0> walks in <extra_id_1> park")
    >>> token_ids[-1] == tokenizer.end_id
    True
    >>> tokenizer.decode(token_ids)
    'The<extra_id_0> walks in<extra_id_1> park'

    Reference: https://arxiv.org/abs/1910.10683
    """

    def __init__(self, model_path, extra_ids=100):
        super().__init__(model_path, cls_token="", sep_token="", mask_token="")
        processor = self._processor
        if processor.eos_id() < 0:
            raise ValueError(
                f"SentencePiece model {self.model_path!r} has no end-of-sequence "
                "(eos) piece; T5 appends one to every text."
            )
        self._sep = processor.id_to_piece(processor.eos_id())
        extra_ids = check_integer(extra_ids, "extra_ids")
        if extra_ids < 0:
            raise ValueError(f"extra_ids must be at least 0, got {extra_ids}.")
        self.extra_ids = extra_ids
        self._model_size = len(self._inverse)
        for index in range(extra_ids):
            token = f"<extra_id_{index}>"
            if token in self._vocab:
                raise ValueError(
                    f"SentencePiece model {self.model_path!r} already has the piece "
                    f"{token!r} (id {self._vocab[token]}); T5 adds the sentinels after "
                    "the model's pieces. Pass extra_ids=0 to use the model's own."
                )
            token_id = self._model_size + extra_ids - 1 - index
            self._vocab[token] = token_id
            self._inverse[token_id] = token
        # Tokens written literally: split out of text, never decoded by
        # SentencePiece. Longest first, so that the regex matches as
        # T5TokenizerFast's added tokens do (leftmost, then longest).
        self._literal = {self._pad, self._sep, self._unk} - {None}
        self._literal |= {self._inverse[self._model_size + i] for i in range(extra_ids)}
        self._literal_pattern = re.compile(
            "|".join(re.escape(token) for token in sorted(self._literal, key=len, reverse=True))
        )
        self._separators = str.maketrans(
            {c: " " for c in WHITESPACE if c in processor.normalize(f"a{c}b")}
        )

    @property
    def end_id(self):
        """The id of `</s>`, appended to every text (the same as `sep_id`)."""
        return self.sep_id

    def _pieces(self, text):
        tokens, spans = [], []
        start = 0
        for match in [*self._literal_pattern.finditer(text), None]:
            end = match.start() if match else len(text)
            if end > start:
                # One character for one, so the spans stay those of `text`.
                segment = text[start:end].translate(self._separators)
                segment_tokens, segment_spans = super()._pieces(segment)
                tokens += segment_tokens
                spans += [(start + begin, start + finish) for begin, finish in segment_spans]
            if match:
                tokens.append(match.group())
                spans.append(match.span())
                start = match.end()
        return tokens, spans

    def decode(self, ids, skip_special_tokens=True):
        """The text of `ids` as `T5TokenizerFast.decode` writes it, sentinels as
        `<extra_id_N>`.

        Args:
            ids: token ids (ints, a NumPy array or a backend tensor); a
                ValueError names one outside `[0, vocab_size)`.
            skip_special_tokens: leave out `<pad>`, `</s>` and `<unk>`; False
                writes them. Sentinels are always kept.
        """
        skipped = self.special_tokens if skip_special_tokens else set()
        text, run = "", []

        def flush():
            nonlocal text
            if run:
                decoded = self._processor.decode(run)
                # SentencePiece drops the space that starts the first word.
                if text and self._inverse[run[0]].startswith("\u2581"):
                    decoded = " " + decoded
                text += decoded
                run.clear()

        for token_id in ids:
            token = self.id_to_token(token_id)
            if token in skipped:
                continue
            if token in self._literal:
                flush()
                text += token
            else:
                run.append(check_integer(token_id, "A token id"))
        flush()
        return text
