"""Cutting a long text into pieces of at most `maxlen` characters at
separators, coarsest first."""


def text_segmentate(text, maxlen, seps="\n", strips=None):
    """Cuts `text` into pieces of at most `maxlen` characters, cutting only
    at separators, as bert4keras's `text_segmentate`.

    The text is split at the first separator; consecutive parts are joined
    back (each keeping the separator that ended it) while the joined piece
    stays within `maxlen`; each joined piece still longer than `maxlen` is
    cut the same way at the next separator, and so on. Every piece is
    stripped of surrounding whitespace and then of the characters in
    `strips`. A text of at most `maxlen` characters is one piece.

    Guarantees: the pieces, in order, are the text with only whitespace and
    `strips` characters removed at their ends; a piece is longer than
    `maxlen` only by a run of separators at its end (separators in a row
    stay with the part before them) or where the text had no separator left
    to cut at. Unlike bert4keras, pieces that are
    empty after stripping (between two separators) are left out, and an
    empty text gives `[]`.

    Args:
        text: a string.
        maxlen: the longest piece, in characters (an int >= 1).
        seps: the separators, coarsest first: a string of one-character
            separators (`"\\n。！？；，"`) or a sequence of strings.
        strips: characters removed from both ends of every piece after
            whitespace (as `str.strip(strips)`), or None for none more.

    Returns a list of strings.

    Example:

    >>> text_segmentate("ab,cd,ef.gh", 6, seps=".,")
    ['ab,cd,', 'ef.', 'gh']
    >>> text_segmentate("ab,cd,ef.gh", 6, seps=".,", strips=".,")
    ['ab,cd', 'ef', 'gh']
    """
    if not isinstance(text, str):
        raise TypeError(
            f"text_segmentate: `text` must be a str; received {type(text).__name__}: {text!r}."
        )
    if not isinstance(maxlen, int) or maxlen < 1:
        raise ValueError(f"text_segmentate: `maxlen` must be an int >= 1; received {maxlen!r}.")
    if isinstance(seps, str):
        seps = list(seps)
    if any(not isinstance(sep, str) or not sep for sep in seps):
        raise ValueError(
            f"text_segmentate: `seps` must be a string or a sequence of non-empty strings; "
            f"received {seps!r}."
        )
    return [piece for piece in _pieces(text, maxlen, list(seps), strips) if piece]


def _pieces(text, maxlen, seps, strips):
    text = text.strip().strip(strips)
    if len(text) <= maxlen or not seps:
        return [text]
    sep, finer = seps[0], seps[1:]
    parts = text.split(sep)
    # Each part but the last keeps the separator that ended it.
    units = [part + sep for part in parts[:-1]] + [parts[-1]]
    pieces, joined = [], ""
    for part, unit in zip(parts, units):
        # Room for the part and a separator after it; empty parts never
        # start a new piece.
        if joined and part and len(joined) + len(part) + 1 > maxlen:
            pieces.extend(_pieces(joined, maxlen, finer, strips))
            joined = ""
        joined += unit
    if joined:
        pieces.extend(_pieces(joined, maxlen, finer, strips))
    return pieces
