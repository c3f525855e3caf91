import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers.dot_product_attention import large_negative
from tests import reference
from tests.harness import run_layer_test, to_numpy

RNG = np.random.default_rng(13)
HEADS, HEAD_SIZE, HIDDEN, LENGTH = 2, 8, 12, 5


def dense(x, kernel, bias):
    return x.astype("float64") @ kernel + bias


def masked(logits, mask, tril_mask):
    """Sets padding rows/columns and, with `tril_mask`, end < start to the
    layer's documented large negative, entry by entry."""
    logits = logits.copy()
    batch, heads, length, _ = logits.shape
    for b, a, i, j in np.ndindex(batch, heads, length, length):
        padding = mask is not None and not (mask[b, i] and mask[b, j])
        if padding or (tril_mask and j < i):
            logits[b, a, i, j] = large_negative("float32")
    return logits


def global_pointer_reference(x, weights, mask, use_rope, tril_mask):
    """Su (2021): per head a, q/k are the two halves of the head's 2*head_size
    projection; s[i, j] = q_i . k_j / sqrt(head_size)."""
    projected = dense(x, *weights).reshape(x.shape[0], x.shape[1], HEADS, 2 * HEAD_SIZE)
    query, key = projected[..., :HEAD_SIZE], projected[..., HEAD_SIZE:]
    if use_rope:
        query, key = reference.rope(query), reference.rope(key)
    logits = np.zeros((x.shape[0], HEADS, x.shape[1], x.shape[1]))
    for b, a, i, j in np.ndindex(*logits.shape):
        logits[b, a, i, j] = query[b, i, a] @ key[b, j, a] / np.sqrt(HEAD_SIZE)
    return masked(logits, mask, tril_mask)


def efficient_reference(x, weights, mask, use_rope, tril_mask):
    """Su (2022): shared q (even features) / k (odd features); type a adds
    (b_j[2a] + b_i[2a+1]) / 2, b from a second projection of the first."""
    projected = dense(x, *weights[:2])
    biases = dense(projected, *weights[2:])
    query, key = projected[..., None, ::2], projected[..., None, 1::2]
    if use_rope:
        query, key = reference.rope(query), reference.rope(key)
    logits = np.zeros((x.shape[0], HEADS, x.shape[1], x.shape[1]))
    for b, a, i, j in np.ndindex(*logits.shape):
        logits[b, a, i, j] = query[b, i, 0] @ key[b, j, 0] / np.sqrt(HEAD_SIZE) + (
            biases[b, j, 2 * a] + biases[b, i, 2 * a + 1]
        ) / 2
    return masked(logits, mask, tril_mask)


CASES = [
    (keras_attn.layers.GlobalPointer, global_pointer_reference),
    (keras_attn.layers.EfficientGlobalPointer, efficient_reference),
]


@pytest.mark.parametrize("layer_cls, numpy_reference", CASES)
def test_span_logits_match_the_papers(layer_cls, numpy_reference):
    # The harness test below covers use_rope=True, tril_mask=False unmasked.
    use_rope, tril_mask = True, True
    x = RNG.normal(size=(3, LENGTH, HIDDEN)).astype("float32")
    mask = np.ones((3, LENGTH), bool)
    mask[1, 3:] = False
    mask[2, :] = False
    layer = layer_cls(HEADS, HEAD_SIZE, use_rope=use_rope, tril_mask=tril_mask)
    logits = to_numpy(layer(x, mask=mask))
    expected = numpy_reference(x, [to_numpy(w) for w in layer.weights], mask, use_rope, tril_mask)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)
    # The Keras mask of the input is honoured like the argument.
    inputs = keras.Input((LENGTH,), dtype="int32")
    features = keras.layers.Embedding(10, HIDDEN, mask_zero=True)(inputs)
    model = keras.Model(inputs, layer_cls(HEADS, HEAD_SIZE)(features))
    tokens = np.where(mask, RNG.integers(1, 10, size=mask.shape), 0)
    from_keras_mask = to_numpy(model(tokens))
    pointer = model.layers[-1]
    explicit = to_numpy(pointer(to_numpy(model.layers[1](tokens)), mask=mask))
    np.testing.assert_array_equal(from_keras_mask, explicit)


def harness_arguments(numpy_reference, tmp_path):
    # Unmasked here: the harness compares float16 with float32 outputs, whose
    # masked entries are each dtype's own large negative.
    x = 0.5 * RNG.normal(size=(2, LENGTH, HIDDEN)).astype("float32")  # bfloat16 within 0.05
    return dict(
        init_kwargs={"heads": HEADS, "head_size": HEAD_SIZE, "tril_mask": False},
        inputs={"inputs": x},
        expected_output_shape=(2, HEADS, LENGTH, LENGTH),
        reference=lambda layer, inputs: numpy_reference(
            inputs["inputs"], [to_numpy(w) for w in layer.weights], None, True, False
        ),
        atol=1e-4,
        tmp_path=tmp_path,
    )


def test_global_pointer_through_the_harness(tmp_path):
    run_layer_test(
        keras_attn.layers.GlobalPointer, **harness_arguments(global_pointer_reference, tmp_path)
    )


def test_efficient_global_pointer_through_the_harness(tmp_path):
    run_layer_test(
        keras_attn.layers.EfficientGlobalPointer, **harness_arguments(efficient_reference, tmp_path)
    )


def test_efficient_global_pointer_is_smaller():
    counts = []
    for layer_cls, _ in CASES:
        layer = layer_cls(heads=4, head_size=8)
        layer.build((None, None, 32))
        counts.append(layer.count_params())
    assert counts == [32 * 4 * 16 + 4 * 16, 32 * 16 + 16 + 16 * 8 + 8]
