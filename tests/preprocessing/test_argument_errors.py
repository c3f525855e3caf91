"""Preprocessing arguments that cannot work are refused by name, with the
value received, instead of failing later inside numpy or Keras (issue 34,
item 13)."""

import pytest

from keras_attn.preprocessing import DataGenerator
from keras_attn.preprocessing import text_segmentate


def test_an_empty_data_generator_is_refused_when_made():
    with pytest.raises(ValueError, match=r"DataGenerator: `data` holds no examples \(len 0\)"):
        DataGenerator([], batch_size=4)


@pytest.mark.parametrize("length", [-2, 0, 2.5, "8", True])
def test_a_length_that_is_not_a_positive_int_is_refused(length):
    with pytest.raises(ValueError, match=rf"DataGenerator: `length` must be None .*received {length!r}"):
        DataGenerator([[1, 2, 3]], length=length)


def test_a_valid_length_pads_and_cuts():
    generator = DataGenerator([[1, 2, 3], [4]], batch_size=2, shuffle=False, length=2)
    assert generator[0].tolist() == [[1, 2], [4, 0]]


@pytest.mark.parametrize("text", [None, b"ab,cd", 12])
def test_text_segmentate_names_a_text_that_is_not_a_str(text):
    with pytest.raises(TypeError, match=rf"text_segmentate: `text` must be a str; received {type(text).__name__}"):
        text_segmentate(text, 5)
