"""Cutting a long text into pieces at separators."""

from keras_attn.preprocessing.arguments import check_count


def text_segmentate(text, maxlen, seps="\n", strips=None):
    """Cuts `text` into pieces of at most `maxlen` characters at separators, as
    bert4keras's `text_segmentate`.

    The text is split at the first separator; consecutive parts (each keeping
    its separator) are joined while within `maxlen`; a joined piece still too
    long is cut the same way at the next separator. Pieces are stripped of
    whitespace, then of `strips`. A piece exceeds `maxlen` only by a run of
    separators at its end or where no separator is left. Unlike bert4keras,
    empty pieces are left out (an empty text gives `[]`).

    Args:
        text: a string (TypeError otherwise).
        maxlen: the longest piece, an int >= 1.
        seps: separators, coarsest first: a string of one-character separators
            or a sequence of strings.
        strips: characters stripped from both ends of every piece, or None.

    Returns a list of strings.

    Example:

    >>> text_segmentate("ab,cd,ef.gh", 6, seps=".,", strips=".,")
    ['ab,cd', 'ef', 'gh']
    """
    if not isinstance(text, str):
        raise TypeError(
            f"text_segmentate: `text` must be a str; received {type(text).__name__}: {text!r}."
        )
    check_count("text_segmentate", "maxlen", maxlen)
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
