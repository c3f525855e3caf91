"""Banded local attention: `attention_window` computed on blocks must give the
dense masked computation's numbers, gradients included, in linear memory."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers import banded
from tests import reference
from tests.harness import run_layer_test, to_numpy
from tests.reference import band

RNG = np.random.default_rng(7)

# (window, causal, blockwise): sliding causal, bidirectional even and odd,
# XPOS blockwise, and the degenerate window of one.
BANDS = [(4, True, False), (4, False, False), (5, False, False), (3, True, True), (1, False, False)]


def dense_twin(layer):
    """The same layer without a window (so it never bands, and is not
    blockwise: the caller passes the band as a mask), same weights."""
    return layer.__class__.from_config(
        dict(layer.get_config(), attention_window=None, blockwise_attention=False)
    )


def layer_and_dense_twin(window, query):
    """A windowed two-head layer and its dense twin, built on `query`."""
    layer = keras_attn.MultiHeadAttention(2, 4, attention_window=window)
    layer(query)
    twin = dense_twin(layer)
    twin(query)
    twin.set_weights(layer.get_weights())
    return layer, twin


def sgd_step(inputs, outputs, data, target):
    """The functional model `inputs -> outputs` after one SGD step on `data`."""
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    model.fit(data, target, batch_size=len(target), epochs=1, verbose=0, shuffle=False)
    return model


def padding(batch, length):
    keep = np.ones((batch, length), bool)
    keep[0, length - 3 :] = False
    return keep


def with_lengths(cases, lengths):
    """`cases` x `lengths` x `fused_attention`: the einsum path at every
    length (one whose last block is partial, one of whole blocks), the fused
    kernel at the first only; the banding is the same code for both paths,
    and each fused case costs seconds of compilation on JAX. The tests
    here share the lengths 17 (a partial last block for every window but
    1) and 24 (whole blocks): JAX compiles its eager ops once per shape, so
    each further length costs compilations, not coverage."""
    return [
        (*case, length, fused)
        for case in cases
        for length in lengths
        for fused in (True, False)
        if not fused or length == lengths[0]
    ]


@pytest.mark.parametrize(
    "window, causal, blockwise, length, fused_attention", with_lengths(BANDS, (17, 24))
)
def test_banded_equals_dense_masked_attention(window, causal, blockwise, length, fused_attention):
    query = RNG.normal(size=(2, length, 8)).astype("float32")
    keep = padding(2, length)
    layer = keras_attn.MultiHeadAttention(
        2, 4, key_size=6, attention_window=window, blockwise_attention=blockwise,
        fused_attention=fused_attention,
    )
    # The band is reached blockwise for these lengths, not densely.
    assert banded.layout_for_call(
        window, blockwise, causal, query, query, keep[:, None], None, None, False
    ) is not None
    output = to_numpy(layer(query, attention_mask=keep[:, None], use_causal_mask=causal))

    full = keep[:, None, :] & band(length, length, window, causal, blockwise)[None]
    expected, _ = reference.attention(layer, query, attention_mask=full, use_causal_mask=causal)
    np.testing.assert_allclose(output, expected, atol=1e-5)

    twin = dense_twin(layer)
    twin(query)
    twin.set_weights(layer.get_weights())
    dense_mask = keras_attn.LocalMaskBaseline(window, causal, blockwise and causal)(query)
    dense_mask = keras.ops.logical_and(dense_mask, keep[:, None, None, :])
    dense = to_numpy(twin(query, attention_mask=dense_mask, use_causal_mask=causal))
    np.testing.assert_allclose(output, dense, atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_banded_talking_heads_rotary_and_log_n(causal):
    """Everything that acts on the blocks' heads: talking heads' mixing,
    rotary positions (applied before blocking) and log-n scaling (counted
    on the blocked mask). Length 17: a partial last block for both bands."""
    length, window = 17, 6
    query = RNG.normal(size=(2, length, 8)).astype("float32")
    keep = padding(2, length)
    for layer in (
        keras_attn.TalkingHeadsAttention(
            3, 4, key_heads=2, value_heads=4, attention_window=window,
            talking_heads_initializer="random_normal",
        ),
        keras_attn.MultiHeadAttention(
            2, 4, attention_window=window, position_encoding="rotary", log_n_train_length=4
        ),
    ):
        output = to_numpy(layer(query, attention_mask=keep[:, None], use_causal_mask=causal))
        twin = dense_twin(layer)
        twin(query)
        twin.set_weights(layer.get_weights())
        dense_mask = keras_attn.LocalMaskBaseline(window, causal)(query)
        dense_mask = keras.ops.logical_and(dense_mask, keep[:, None, None, :])
        dense = to_numpy(twin(query, attention_mask=dense_mask, use_causal_mask=causal))
        np.testing.assert_allclose(output, dense, atol=1e-5, err_msg=layer.name)


def relative_bias(kind, heads, causal):
    """A relative-position bias layer with non-trivial parameters, and its
    `(1, heads, q, k)` numpy reference (tests/reference.py)."""
    if kind == "alibi":
        layer = keras_attn.layers.ALiBiBias(heads, causal=causal)
        slopes = keras_attn.layers.alibi_bias.alibi_slopes(heads)
        return layer, lambda length: reference.alibi_bias(slopes, length, length, causal)
    if kind.startswith("kerple"):
        form = kind.split("_")[1]
        layer = keras_attn.layers.KerpleBias(heads, form=form)
        layer.build()
        layer.r1_variable.assign(RNG.normal(size=(heads,)).astype("float32"))
        layer.r2_variable.assign(RNG.normal(size=(heads,)).astype("float32"))
        return layer, lambda length: reference.kerple_bias(
            to_numpy(layer.r1_variable), to_numpy(layer.r2_variable), form, length, length
        )
    layer = keras_attn.layers.SandwichBias(dim=8, scale=0.5)
    return layer, lambda length: reference.sandwich_bias(8, 0.5, length, length)


def dense_biased_twin_output(layer, query, keep, window, causal, bias_layer):
    """The dense path's output for `layer`'s weights: the band and padding as
    an explicit mask, the bias as the full `(1, heads, T, T)` matrix."""
    twin = dense_twin(layer)
    twin(query)
    twin.set_weights(layer.get_weights())
    dense_mask = keras.ops.logical_and(
        keras_attn.LocalMaskBaseline(window, causal)(query), keep[:, None, None, :]
    )
    return to_numpy(
        twin(query, attention_mask=dense_mask, attention_bias=bias_layer(query), use_causal_mask=causal)
    )


# (bias, causal, window): each scheme with the band it is used with.
BIASED_BANDS = [
    ("alibi", True, 4), ("alibi", False, 5), ("kerple_log", True, 6),
    ("kerple_power", False, 4), ("sandwich", False, 6),
]


@pytest.mark.parametrize(
    "kind, causal, window, length, fused_attention", with_lengths(BIASED_BANDS, (17, 24))
)
def test_banded_relative_position_biases(kind, causal, window, length, fused_attention):
    """ALiBi, KERPLE and Sandwich given by distance band like the mask: the
    numpy reference of the dense biased, masked attention, and the layer's
    own dense path given the full bias matrix."""
    query = RNG.normal(size=(2, length, 8)).astype("float32")
    keep = padding(2, length)
    layer = keras_attn.MultiHeadAttention(
        2, 4, key_size=6, attention_window=window, fused_attention=fused_attention
    )
    bias_layer, reference_bias = relative_bias(kind, 2, causal)
    by_distance = bias_layer(query, by_distance=True)
    assert tuple(by_distance.shape)[-1] == 2 * length - 1
    assert banded.layout_for_call(
        window, False, causal, query, query, keep[:, None], None, by_distance, False
    ) is not None
    output = to_numpy(
        layer(query, attention_mask=keep[:, None], distance_bias=by_distance, use_causal_mask=causal)
    )
    full = keep[:, None, :] & band(length, length, window, causal)[None]
    expected, _ = reference.attention(
        layer, query, attention_mask=full, attention_bias=reference_bias(length),
        use_causal_mask=causal,
    )
    np.testing.assert_allclose(output, expected, atol=1e-5)

    dense = dense_biased_twin_output(layer, query, keep, window, causal, bias_layer)
    np.testing.assert_allclose(output, dense, atol=1e-6)


def test_banded_talking_heads_with_a_bias_by_distance():
    length, window = 17, 6
    query = RNG.normal(size=(2, length, 8)).astype("float32")
    keep = padding(2, length)
    layer = keras_attn.TalkingHeadsAttention(
        3, 4, key_heads=2, value_heads=4, attention_window=window,
        talking_heads_initializer="random_normal",
    )
    bias_layer, _ = relative_bias("alibi", 3, True)
    output = to_numpy(layer(
        query, attention_mask=keep[:, None], distance_bias=bias_layer(query, by_distance=True),
        use_causal_mask=True,
    ))
    dense = dense_biased_twin_output(layer, query, keep, window, True, bias_layer)
    np.testing.assert_allclose(output, dense, atol=1e-5)


def test_banded_kerple_gradients_equal_the_dense_ones():
    """One SGD step from equal weights, KERPLE's learned r1, r2 included."""
    length, window = 33, 8
    query = RNG.normal(size=(4, length, 8)).astype("float32")
    target = RNG.normal(size=(4, length, 8)).astype("float32")
    keep = padding(4, length)

    def trained(attention, bias_layer, banded_path):
        inputs = keras.Input((length, 8), name="query")
        if banded_path:
            outputs = attention(
                inputs, distance_bias=bias_layer(inputs, by_distance=True), use_causal_mask=True
            )
        else:
            mask = keras_attn.LocalMaskBaseline(window, True)(inputs)
            outputs = attention(
                inputs, attention_mask=mask, attention_bias=bias_layer(inputs), use_causal_mask=True
            )
        return [to_numpy(w) for w in sgd_step(inputs, outputs, query, target).weights]

    layer, twin = layer_and_dense_twin(window, query)
    bias_layer, _ = relative_bias("kerple_log", 2, True)
    twin_bias, _ = relative_bias("kerple_log", 2, True)
    twin_bias.set_weights(bias_layer.get_weights())
    initial = [to_numpy(w).copy() for w in bias_layer.weights]
    banded_weights = trained(layer, bias_layer, True)
    dense_weights = trained(twin, twin_bias, False)
    assert len(banded_weights) == len(dense_weights) == 10
    for before, after in zip(initial, [to_numpy(w) for w in bias_layer.weights]):
        assert np.abs(after - before).max() > 1e-6  # r1, r2 learned something
    for after_banded, after_dense in zip(banded_weights, dense_weights):
        np.testing.assert_allclose(after_banded, after_dense, atol=1e-5)


def test_implicit_keras_masks_reach_the_blocks():
    tokens = RNG.integers(1, 20, size=(2, 21)).astype("int32")
    tokens[1, 15:] = 0
    embedding = keras.layers.Embedding(20, 8, mask_zero=True)
    layer = keras_attn.MultiHeadAttention(2, 4, attention_window=4)
    token_input = keras.Input((None,), dtype="int32")
    model = keras.Model(token_input, layer(embedding(token_input), use_causal_mask=True))
    output = to_numpy(model(tokens))
    keep = tokens != 0
    full = keep[:, :, None] & keep[:, None, :] & band(21, 21, 4, True)[None]
    expected, _ = reference.attention(
        layer, to_numpy(embedding(tokens)), attention_mask=full, use_causal_mask=True
    )
    # Padded queries attend to nothing (the reference gives them a zero
    # attention result too).
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_fit_step_gives_the_dense_gradients():
    """One SGD step from equal weights moves every weight equally, so the
    banded gradients are the dense ones."""
    length, window = 40, 8
    query = RNG.normal(size=(4, length, 8)).astype("float32")
    target = RNG.normal(size=(4, length, 8)).astype("float32")
    keep = padding(4, length)[:, None, :]

    def trained(layer, attention_mask):
        inputs = {
            "query": keras.Input((length, 8), name="query"),
            "attention_mask": keras.Input(attention_mask.shape[1:], dtype="bool", name="attention_mask"),
        }
        outputs = layer(
            inputs["query"], attention_mask=inputs["attention_mask"], use_causal_mask=True
        )
        sgd_step(inputs, outputs, {"query": query, "attention_mask": attention_mask}, target)
        return [to_numpy(w) for w in layer.weights]

    layer, twin = layer_and_dense_twin(window, query)
    initial = [to_numpy(w).copy() for w in layer.weights]
    dense_mask = keep[:, None] & band(length, length, window, True)[None, None]
    banded_weights = trained(layer, keep)
    dense_weights = trained(twin, dense_mask)
    paths = [w.path for w in layer.weights]
    for path, before, after_banded, after_dense in zip(
        paths, initial, banded_weights, dense_weights
    ):
        # The step did move them; the key bias adds a constant to each row of
        # scores, which the softmax ignores, so its gradient is zero.
        if not path.endswith("key_dense/bias"):
            assert np.abs(after_dense - before).max() > 1e-4, path
        np.testing.assert_allclose(after_banded, after_dense, atol=1e-5)


def test_layer_harness_on_the_banded_path(tmp_path):
    length = 19
    query = RNG.normal(size=(2, length, 8)).astype("float32")
    keep = padding(2, length)[:, None, :]

    def numpy_reference(layer, inputs):
        full = inputs["attention_mask"] & band(length, length, 4, False)[None]
        return reference.attention(layer, inputs["query"], attention_mask=full)[0]

    run_layer_test(
        keras_attn.MultiHeadAttention,
        {"heads": 2, "head_size": 4, "key_size": 8, "attention_window": 4},
        inputs={"query": query, "attention_mask": keep},
        expected_output_shape=(2, length, 8),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("causal", [True, False])
def test_memory_is_linear_in_length(causal, with_bias):
    """131,072 tokens: a dense float32 score matrix would need 64 GiB, more
    than the test machine has, so this runs only if nothing of size
    length x length is ever built. The output is checked against the dense
    computation on a slice whose receptive field the slice contains."""
    length, window = 131072, 16
    query = RNG.normal(size=(1, length, 4)).astype("float32")
    layer = keras_attn.MultiHeadAttention(1, 4, attention_window=window)
    bias_layer = keras_attn.layers.ALiBiBias(1, causal=causal) if with_bias else None
    distance_bias = bias_layer(query, by_distance=True) if with_bias else None
    output = to_numpy(layer(query, distance_bias=distance_bias, use_causal_mask=causal))
    assert output.shape == (1, length, 4) and np.all(np.isfinite(output))
    start, stop = 70000, 70064
    reach = window
    sliced = query[:, start - reach : stop + reach]
    size = sliced.shape[1]
    expected, _ = reference.attention(
        layer,
        sliced,
        attention_mask=band(size, size, window, causal)[None],
        attention_bias=(
            reference.alibi_bias([0.00390625], size, size, causal) if with_bias else None
        ),
        use_causal_mask=causal,
    )
    np.testing.assert_allclose(output[:, start:stop], expected[:, reach:-reach], atol=1e-5)


def test_dense_path_is_kept_where_banding_cannot_apply():
    query = RNG.normal(size=(2, 20, 8)).astype("float32")
    layer = keras_attn.MultiHeadAttention(2, 4, attention_window=4)
    layer(query)
    pair_mask = np.ones((2, 20, 20), bool)
    # Short sequences (no more keys than one neighbourhood), per-pair masks,
    # biases and returned scores go the dense way.
    def layout(query, attention_mask=None, attention_bias=None, return_scores=False):
        return banded.layout_for_call(
            4, False, True, query, query, attention_mask, attention_bias, None, return_scores
        )

    assert layout(query[:, :8]) is None
    assert layout(query, pair_mask) is None
    assert layout(query, attention_bias=np.zeros((1, 2, 20, 20))) is None
    assert layout(query, return_scores=True) is None
    assert layout(query, pair_mask[:, :1]) is not None
    # Returned scores are the full (dense) probabilities, zero off the band.
    _, scores = layer(query, use_causal_mask=True, return_attention_scores=True)
    scores = to_numpy(scores)
    assert scores.shape == (2, 2, 20, 20)
    assert np.all(scores[:, :, ~band(20, 20, 4, True)] == 0)


@pytest.mark.parametrize("window, causal, blockwise", BANDS)
def test_band_layout_covers_the_band(window, causal, blockwise):
    """Every key of the band lies in the blocks paired with its query, and the
    static neighbourhood mask is the band itself."""
    layout = banded.band_layout(window, causal, blockwise)
    length = 37
    full = band(length, length, window, causal, blockwise)
    neighbourhood = to_numpy(banded.band_mask(layout, window, causal, blockwise))
    size = layout.block_size
    for i in range(length):
        block = i // size
        for j in np.flatnonzero(full[i]):
            offset = j // size - block
            assert offset in layout.offsets, (i, j)
            column = (offset - min(layout.offsets)) * size + j % size
            assert neighbourhood[i % size, column], (i, j)
        # And nothing outside the band is kept.
        for position, offset in enumerate(np.repeat(layout.offsets, size)):
            j = (block + offset) * size + position % size
            if 0 <= j < length and neighbourhood[i % size, position]:
                assert full[i, j], (i, j)


@pytest.mark.skipif(keras.config.backend() != "tensorflow", reason="TensorFlow graphs only")
def test_banded_in_a_graph_of_unknown_length():
    """In a TensorFlow graph traced for any length the blocks are counted at
    run time; the band must come out the same."""
    import tensorflow as tf

    layer = keras_attn.MultiHeadAttention(2, 4, attention_window=4)
    layer(RNG.normal(size=(1, 3, 8)).astype("float32"))
    graph = tf.function(
        lambda x: layer(x, use_causal_mask=True),
        input_signature=[tf.TensorSpec((None, None, 8), tf.float32)],
    )
    for length in (9, 23):
        query = RNG.normal(size=(2, length, 8)).astype("float32")
        expected, _ = reference.attention(
            layer, query, attention_mask=band(length, length, 4, True)[None], use_causal_mask=True
        )
        np.testing.assert_allclose(to_numpy(graph(query)), expected, atol=1e-5)
