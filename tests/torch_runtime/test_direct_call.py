"""`direct_call`: a layer computed by its `call` where Keras' `__call__`
would change nothing, with Keras masks handled as `__call__` handles them,
and `__call__` itself wherever it would cast, convert or hook (torch)."""

import keras
import numpy as np
import pytest

from keras_attn import layers
from keras_attn.torch_runtime.direct_call import calls_directly
from keras_attn.torch_runtime.direct_call import direct_call
from tests.harness import to_numpy

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="layers are called directly on torch only"
)


def tensor(values, mask=None):
    x = keras.ops.convert_to_tensor(values)
    if mask is not None:
        x._keras_mask = keras.ops.convert_to_tensor(mask)
    return x


def hidden(seed=0, shape=(2, 5, 8)):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


PADDING = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)


def built(layer, *args, **kwargs):
    layer(*args, **kwargs)
    return layer


def same_as_keras(layer, *args, **kwargs):
    """`direct_call`'s result and Keras masks equal `layer(...)`'s."""
    direct = direct_call(layer, *args, **kwargs)
    expected = layer(*args, **kwargs)
    for value, reference in zip(keras.tree.flatten(direct), keras.tree.flatten(expected)):
        np.testing.assert_array_equal(to_numpy(value), to_numpy(reference))
        mask, reference_mask = (getattr(x, "_keras_mask", None) for x in (value, reference))
        assert (mask is None) == (reference_mask is None)
        if mask is not None:
            np.testing.assert_array_equal(to_numpy(mask), to_numpy(reference_mask))
    return direct


def test_the_keras_mask_of_the_one_tensor_argument_is_the_mask_argument():
    pointer = layers.GlobalPointer(heads=2, head_size=4)
    x = tensor(hidden(), PADDING)
    built(pointer, x)
    assert calls_directly(pointer, (x,), {})
    logits = same_as_keras(pointer, x)
    # The mask mattered: without it no span is masked.
    unmasked = pointer(tensor(hidden()))
    assert not np.allclose(to_numpy(logits), to_numpy(unmasked))


def test_keras_masks_of_several_tensor_arguments_fill_their_name_mask_arguments():
    attention = layers.MultiHeadAttention(heads=2, head_size=4, key_size=4)
    query, value = tensor(hidden(0), PADDING), tensor(hidden(1), PADDING[::-1].copy())
    built(attention, query, value)
    assert calls_directly(attention, (query, value), {})
    output = same_as_keras(attention, query, value)
    # The value's mask hides its padded keys from every query.
    plain = attention(tensor(hidden(0)), tensor(hidden(1)))
    assert not np.allclose(to_numpy(output), to_numpy(plain))


def test_masks_pass_through_and_are_computed_as_keras_does():
    x = tensor(hidden(), PADDING)
    norm = built(keras.layers.LayerNormalization(), x)
    assert calls_directly(norm, (x,), {})
    assert same_as_keras(norm, x)._keras_mask is not None
    # A layer computing its own masks (Embedding(mask_zero=True)), and a
    # merge of masked and unmasked inputs.
    ids = tensor(np.array([[3, 4, 0], [5, 0, 0]], "int32"))
    embedding = built(keras.layers.Embedding(10, 8, mask_zero=True), ids)
    assert same_as_keras(embedding, ids)._keras_mask is not None
    add = built(keras.layers.Add(), [x, tensor(hidden(1))])
    same_as_keras(add, [x, tensor(hidden(1))])


def test_what_keras_would_cast_or_convert_goes_through_keras():
    dense = built(keras.layers.Dense(3), tensor(hidden()))
    wide = tensor(hidden().astype("float64"))
    assert not calls_directly(dense, (wide,), {})
    assert str(same_as_keras(dense, wide).dtype) == "torch.float32"
    assert not calls_directly(dense, (hidden(),), {})
    same_as_keras(dense, hidden())
    unbuilt = keras.layers.Dense(3)
    assert not calls_directly(unbuilt, (tensor(hidden()),), {})


def test_a_layer_without_masking_given_a_masked_input_warns_as_keras_does():
    layer = built(keras.layers.Lambda(lambda x: x * 2.0), tensor(hidden()))
    x = tensor(hidden(), PADDING)
    assert calls_directly(layer, (x,), {})
    with pytest.warns(UserWarning, match="does not support masking: its outputs carry no mask"):
        output = direct_call(layer, x)
    assert getattr(output, "_keras_mask", None) is None
    with pytest.warns(UserWarning, match="does not support masking"):
        same_as_keras(layer, x)
