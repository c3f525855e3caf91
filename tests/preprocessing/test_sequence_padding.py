import numpy as np
import pytest

import keras_attn


def test_one_dimension_post_and_pre():
    rows = [[1, 2, 3], [4], []]
    np.testing.assert_array_equal(
        keras_attn.sequence_padding(rows), [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    )
    np.testing.assert_array_equal(
        keras_attn.sequence_padding(rows, length=4, value=-1, mode="pre"),
        [[-1, 1, 2, 3], [-1, -1, -1, 4], [-1, -1, -1, -1]],
    )
    # Longer inputs keep their first entries, in both modes.
    np.testing.assert_array_equal(keras_attn.sequence_padding(rows, length=2), [[1, 2], [4, 0], [0, 0]])
    np.testing.assert_array_equal(
        keras_attn.sequence_padding(rows, length=2, mode="pre"), [[1, 2], [0, 4], [0, 0]]
    )
    assert keras_attn.sequence_padding(rows).dtype == np.asarray([1]).dtype


def test_global_pointer_span_labels():
    """(heads, entities, 2) per sample: heads and entities padded, the pair kept."""
    first = np.array([[[1, 2], [3, 3]], [[2, 4], [0, 0]]])  # 2 heads, 2 entities
    second = np.array([[[1, 1]]])  # 1 head, 1 entity
    expected = np.zeros((2, 2, 2, 2), int)
    expected[0] = first
    expected[1, 0, 0] = [1, 1]
    np.testing.assert_array_equal(keras_attn.sequence_padding([first, second], seq_dims=2), expected)


def test_square_matrices_with_lengths_per_dimension():
    matrices = [np.arange(4.0).reshape(2, 2), np.ones((3, 3))]
    expected = np.full((2, 3, 4), 9.0)
    expected[0, :2, :2] = [[0, 1], [2, 3]]
    expected[1, :3, :3] = 1
    np.testing.assert_array_equal(
        keras_attn.sequence_padding(matrices, length=(3, 4), value=9, seq_dims=2), expected
    )
    pre = keras_attn.sequence_padding(matrices, length=3, seq_dims=2, mode="pre")
    np.testing.assert_array_equal(pre[0], [[0, 0, 0], [0, 0, 1], [0, 2, 3]])


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(inputs=[[1]], mode="middle"), 'must be "post" or "pre"; received \'middle\''),
        (dict(inputs=[]), "`inputs` is empty"),
        (dict(inputs=[np.zeros((2, 3)), np.zeros((2, 4))]), r"input 1 has shape \(2, 4\).*\(3,\)"),
        (dict(inputs=[np.zeros((2, 3))], seq_dims=2, length=(1, 2, 3)), "give 2 size"),
        (dict(inputs=[[1]], seq_dims=0), "`seq_dims` must be an int >= 1; received 0"),
    ],
)
def test_errors_name_the_problem(arguments, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.sequence_padding(**arguments)
