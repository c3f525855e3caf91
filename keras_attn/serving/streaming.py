"""Text as tokens arrive, without splitting a character."""


class TextStream:
    """Turns a request's tokens into text deltas as they arrive.

    A token's text can depend on the tokens around it (SentencePiece drops
    the space of a sequence's first piece; a byte-level BPE token can hold
    part of a UTF-8 character, decoded as U+FFFD until the rest arrives).
    So each call decodes a short window of tokens before the new ones
    (`context` of the prompt to start with) and with them, and gives the
    new text only once it does not end in U+FFFD; the joined deltas equal
    the decoding of all generated tokens together (a tokenizer whose
    pieces are context-free beyond that window).

    Args:
        tokenizer: anything with `decode(ids)`.
        prompt: the prompt's token ids (their text is not given).
        context: prompt tokens decoded before the first new one.
    """

    def __init__(self, tokenizer, prompt=(), context=5):
        self.tokenizer = tokenizer
        self.ids = list(prompt)
        self._prefix = max(len(self.ids) - context, 0)
        self._read = len(self.ids)

    def add(self, tokens):
        """The text the new `tokens` complete ("" while a character is
        incomplete)."""
        self.ids.extend(int(t) for t in tokens)
        return self._delta(final=False)

    def flush(self):
        """What is left at the end (an incomplete character as U+FFFD)."""
        return self._delta(final=True)

    def _delta(self, final):
        before = self.tokenizer.decode(self.ids[self._prefix:self._read])
        now = self.tokenizer.decode(self.ids[self._prefix:])
        if len(now) <= len(before) or (now.endswith("\ufffd") and not final):
            return ""
        self._prefix, self._read = self._read, len(self.ids)
        return now[len(before):]
