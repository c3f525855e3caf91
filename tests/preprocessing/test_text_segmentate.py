import random

import pytest

from keras_attn.preprocessing import text_segmentate


def test_hand_computed_pieces():
    # 11 characters over 6: cut at "." into "ab,cd,ef." (9) and "gh"; the
    # first is cut at "," and joined back while within 6.
    assert text_segmentate("ab,cd,ef.gh", 6, seps=".,") == ["ab,cd,", "ef.", "gh"]
    assert text_segmentate("ab,cd,ef.gh", 6, seps=".,", strips=".,") == ["ab,cd", "ef", "gh"]
    # Within maxlen: one piece, only stripped.
    assert text_segmentate("  ab.cd \n", 5, seps=".") == ["ab.cd"]
    # Lines, then sentences: the second line is too long, cut at "。".
    text = "第一行\n甲乙丙。丁戊己。庚辛"
    assert text_segmentate(text, 5, seps="\n。") == ["第一行", "甲乙丙。", "丁戊己。", "庚辛"]
    # No separator left: a piece longer than maxlen stays whole.
    assert text_segmentate("abcdefgh,ij", 4, seps=",") == ["abcdefgh,", "ij"]
    # Whitespace around pieces goes, even with strips=None.
    assert text_segmentate("aaa\n  bbb  \nccc", 4) == ["aaa", "bbb", "ccc"]
    # Separators of several characters.
    assert text_segmentate("one<br>two<br>three", 8, seps=["<br>"]) == ["one<br>", "two<br>", "three"]


def test_empty_pieces_are_left_out():
    assert text_segmentate("", 3) == []
    assert text_segmentate("ab..cd", 3, seps=".", strips=".") == ["ab", "cd"]


@pytest.mark.parametrize("maxlen", [0, 2.5, None])
def test_bad_maxlen_is_named(maxlen):
    with pytest.raises(ValueError, match="maxlen"):
        text_segmentate("abc", maxlen)


def test_pieces_rebuild_the_text_and_respect_maxlen():
    rng = random.Random(0)
    for _ in range(500):
        # No whitespace and no strips: the pieces must rebuild the text exactly.
        text = "".join(rng.choice("ab\n.,") for _ in range(rng.randint(0, 40)))
        text = text.replace("\n", ";")  # the top-level strip would drop newlines
        seps_used = rng.choice([";.,", ".,", ","])
        maxlen = rng.randint(1, 10)
        pieces = text_segmentate(text, maxlen, seps=seps_used)
        assert "".join(pieces) == text, (text, maxlen, pieces)
        assert all(pieces)
        for piece in pieces:
            if len(piece) > maxlen:
                # Longer only by separators in a row at its end, or for
                # want of a separator to cut at.
                body = piece.rstrip(seps_used)
                assert len(body) <= maxlen or not any(sep in body for sep in seps_used), (
                    text, maxlen, piece,
                )
