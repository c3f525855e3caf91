import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers import dot_product_attention
from keras_attn.layers.dot_product_attention import DotProductAttention
from tests import reference
from tests.harness import BACKEND, run_layer_test, supports_jit, to_numpy

RNG = np.random.default_rng(1234)


def random(*shape):
    return RNG.normal(size=shape).astype("float32")


def padding_mask(batch, query_length, key_length, fully_masked_row=True):
    """A boolean (batch, query_length, key_length) mask with padded keys and,
    optionally, one query row that may attend to nothing."""
    mask = np.ones((batch, query_length, key_length), bool)
    mask[0, :, key_length - 2 :] = False
    if fully_masked_row:
        mask[1, 1, :] = False
    return mask


@pytest.mark.parametrize("fused_attention", [True, False])
@pytest.mark.parametrize(
    "init_kwargs",
    [
        {"heads": 2, "head_size": 4},
        {"heads": 2, "head_size": 4, "key_size": 16, "out_dim": 6},
        {"heads": 3, "head_size": 8, "key_size": 2, "use_bias": False},
    ],
    ids=["square", "wide-keys", "narrow-keys"],
)
def test_layer_harness(init_kwargs, fused_attention, tmp_path):
    query, value = random(2, 5, 8), random(2, 7, 8)
    mask = padding_mask(2, 5, 7)
    out_dim = init_kwargs.get("out_dim", 8)

    def numpy_reference(layer, inputs):
        return reference.attention(
            layer, inputs["query"], inputs["value"], attention_mask=inputs["attention_mask"]
        )[0]

    run_layer_test(
        keras_attn.MultiHeadAttention,
        dict(init_kwargs, fused_attention=fused_attention),
        inputs={"query": query, "value": value, "attention_mask": mask},
        expected_output_shape=(2, 5, out_dim),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


def test_parameter_count_is_exact():
    d_in, heads, head_size, key_size, out_dim = 10, 3, 4, 12, 7
    layer = keras_attn.MultiHeadAttention(
        heads, head_size, key_size=key_size, out_dim=out_dim
    )
    layer(random(1, 5, d_in))
    expected = (
        2 * (d_in * heads * key_size + heads * key_size)
        + d_in * heads * head_size
        + heads * head_size
        + heads * head_size * out_dim
        + out_dim
    )
    assert layer.count_params() == expected
    assert tuple(layer.query_dense.kernel.shape) == (d_in, heads * key_size)
    assert tuple(layer.value_dense.kernel.shape) == (d_in, heads * head_size)
    assert tuple(layer.output_dense.kernel.shape) == (heads * head_size, out_dim)


@pytest.fixture
def fused_calls(monkeypatch):
    """Counts the calls of the backend's fused kernel (`fused_attention`)."""
    calls = []
    fused_kernel = dot_product_attention.fused_attention

    def counted(*args, **kwargs):
        calls.append(tuple(args[0].shape))
        return fused_kernel(*args, **kwargs)

    monkeypatch.setattr(dot_product_attention, "fused_attention", counted)
    return calls


@pytest.mark.parametrize("key_size", [4, 16, 2], ids=["square", "wide-keys", "narrow-keys"])
def test_fused_and_einsum_paths_agree(key_size, fused_calls):
    """Forced (`fused_attention=True`), decoupled widths take the fused
    kernel too (the narrower side zero-padded) and
    give the einsum path's numbers, with masks, biases and a fully masked
    row (exact zeros on both paths)."""
    query = random(3, 6, 8)
    mask = padding_mask(3, 6, 6)
    bias = random(1, 2, 6, 6)
    fused = keras_attn.MultiHeadAttention(
        2, 4, key_size=key_size, use_bias=False, fused_attention=True
    )
    einsum = keras_attn.MultiHeadAttention(
        2, 4, key_size=key_size, use_bias=False, fused_attention=False
    )
    fused(query)
    einsum(query)
    einsum.set_weights(fused.get_weights())
    fused_calls.clear()
    for kwargs in ({"attention_mask": mask}, {"attention_mask": mask, "attention_bias": bias}):
        for layer in (fused, einsum):
            output = to_numpy(layer(query, **kwargs))
            assert np.all(output[1, 1] == 0.0), (layer.name, list(kwargs))
            assert np.all(np.abs(output[1, 0]) > 0), (layer.name, list(kwargs))
    assert len(fused_calls) == 2
    for kwargs in (
        {},
        {"attention_mask": mask},
        {"attention_bias": bias},
        {"attention_mask": mask, "attention_bias": bias},
        {"use_causal_mask": True, "attention_mask": mask},
    ):
        np.testing.assert_allclose(
            to_numpy(fused(query, **kwargs)),
            to_numpy(einsum(query, **kwargs)),
            atol=1e-5,
            err_msg=str(list(kwargs)),
        )
    # Only the fused layer called the fused kernel, once per call.
    assert len(fused_calls) == 2 + 5


@pytest.mark.parametrize("key_size", [4, 16], ids=["square", "decoupled"])
def test_the_default_path_for_decoupled_widths_follows_the_measured_rule(key_size, fused_calls):
    """By default (`fused_attention=None`) equal widths are fused on every
    backend, decoupled widths only where `fuses_decoupled_widths()` says
    the fused kernel was the faster (torch); the numbers are the einsum
    path's either way."""
    query = random(2, 5, 8)
    default = keras_attn.MultiHeadAttention(2, 4, key_size=key_size, use_bias=False)
    einsum = keras_attn.MultiHeadAttention(
        2, 4, key_size=key_size, use_bias=False, fused_attention=False
    )
    default(query)
    einsum(query)
    einsum.set_weights(default.get_weights())
    fused_calls.clear()
    np.testing.assert_allclose(
        to_numpy(default(query)), to_numpy(einsum(query)), atol=1e-5
    )
    fuses = key_size == 4 or BACKEND == "torch"
    assert dot_product_attention.fuses_decoupled_widths() == (BACKEND == "torch")
    assert len(fused_calls) == (1 if fuses else 0)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "einsum"])
@pytest.mark.parametrize("key_size, head_size", [(12, 4), (3, 8), (5, 5)])
def test_kernel_matches_numpy(key_size, head_size, fused):
    """The kernel alone, on `(batch, length, heads, size)` heads, against
    numpy: scale, boolean mask, additive bias, fully masked rows."""
    query, key = random(2, 5, 3, key_size), random(2, 7, 3, key_size)
    value = random(2, 7, 3, head_size)
    mask = np.ones((2, 1, 5, 7), bool)
    mask[0, :, :, 5:] = False
    mask[1, :, 3, :] = False
    bias = random(1, 3, 5, 7)
    scale = 1.0 / np.sqrt(key_size)
    kernel = DotProductAttention(scale=scale, fused=fused)
    attended, scores = kernel(query, key, value, mask, bias)
    assert scores is None

    logits = np.einsum("bqhd,bkhd->bhqk", query, key) * scale + bias
    logits = np.where(mask, logits, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
        weights = weights / weights.sum(axis=-1, keepdims=True)
    weights = np.nan_to_num(weights)  # rows with no visible key: all zero
    expected = np.einsum("bhqk,bkhd->bqhd", weights, value)
    attended = to_numpy(attended)
    assert attended.shape == (2, 5, 3, head_size)
    np.testing.assert_allclose(attended, expected, atol=1e-5)
    assert np.all(attended[1, 3] == 0.0)


@pytest.mark.parametrize("attention_dropout", [0.0, 0.3])
@pytest.mark.parametrize("training", [None, False, True])
def test_fused_path_is_decided_by_training(attention_dropout, training, fused_calls):
    """A configured dropout rate keeps the fused kernel at inference; only a
    training call with a rate above 0 takes the einsum path."""
    query = random(2, 6, 8)
    layer = keras_attn.MultiHeadAttention(2, 4, attention_dropout=attention_dropout)
    layer(query, training=training)
    dropout_active = bool(training) and attention_dropout > 0
    assert len(fused_calls) == (0 if dropout_active else 1)


@pytest.mark.parametrize("fused_attention", [True, False])
def test_bias_and_causal_mask_match_reference(fused_attention):
    query = random(2, 6, 8)
    bias = random(2, 3, 6, 6)
    mask = padding_mask(2, 6, 6)
    layer = keras_attn.MultiHeadAttention(3, 4, key_size=8, fused_attention=fused_attention)
    output = layer(query, attention_mask=mask, attention_bias=bias, use_causal_mask=True)
    expected, _ = reference.attention(
        layer, query, attention_mask=mask, attention_bias=bias, use_causal_mask=True
    )
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)


def test_returned_scores_are_the_probabilities():
    query, value = random(2, 4, 8), random(2, 5, 8)
    mask = padding_mask(2, 4, 5)
    layer = keras_attn.MultiHeadAttention(2, 4)
    output, scores = layer(query, value, attention_mask=mask, return_attention_scores=True)
    expected_output, expected_scores = reference.attention(
        layer, query, value, attention_mask=mask
    )
    np.testing.assert_allclose(to_numpy(scores), expected_scores, atol=1e-6)
    np.testing.assert_allclose(to_numpy(output), expected_output, atol=1e-5)


@pytest.mark.parametrize("key_size", [None, 12], ids=["square", "wide-keys"])
@pytest.mark.parametrize("dtype", ["float32", "mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("fused_attention", [True, False])
def test_fully_masked_rows_give_exact_zeros(dtype, fused_attention, key_size):
    query = random(2, 4, 8)
    mask = np.ones((2, 4, 4), bool)
    mask[0, 2, :] = False
    mask[1, :, :] = False
    layer = keras_attn.MultiHeadAttention(
        2, 4, key_size=key_size, use_bias=False, fused_attention=fused_attention, dtype=dtype
    )
    output = to_numpy(keras.ops.cast(layer(query, attention_mask=mask), "float32"))
    assert np.all(np.isfinite(output))
    assert np.all(output[0, 2] == 0.0)
    assert np.all(output[1] == 0.0)
    # The other rows are real attention results, not zeros.
    assert np.all(np.abs(output[0, [0, 1, 3]]).sum(axis=-1) > 0)


@pytest.mark.parametrize("fused_attention", [True, False])
def test_gradients_are_finite_with_fully_masked_rows(fused_attention):
    query = random(2, 4, 8)
    mask = np.ones((2, 4, 4), bool)
    mask[0, 2, :] = False
    inputs = {"query": query, "attention_mask": mask}
    symbolic = {
        "query": keras.Input((4, 8), name="query"),
        "attention_mask": keras.Input((4, 4), dtype="bool", name="attention_mask"),
    }
    layer = keras_attn.MultiHeadAttention(2, 4, fused_attention=fused_attention)
    model = keras.Model(symbolic, layer(**symbolic))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(inputs, random(2, 4, 8), verbose=0)
    for weight in model.trainable_weights:
        assert np.all(np.isfinite(to_numpy(weight))), weight.path


@pytest.mark.parametrize("fused_attention", [True, False])
def test_causal_mask_by_perturbation(fused_attention):
    length = 7
    query = random(1, length, 8)
    layer = keras_attn.MultiHeadAttention(2, 4, fused_attention=fused_attention)
    base = to_numpy(layer(query, use_causal_mask=True))
    for position in range(length):
        perturbed = query.copy()
        perturbed[:, position] += random(1, 8)
        changed = to_numpy(layer(perturbed, use_causal_mask=True))
        # Outputs before the perturbed position are untouched ...
        np.testing.assert_allclose(changed[:, :position], base[:, :position], atol=1e-6)
        # ... and the perturbed position itself does change.
        assert np.abs(changed[:, position] - base[:, position]).max() > 1e-4


def test_permutation_equivariance_without_positions():
    query = random(2, 6, 8)
    permutation = RNG.permutation(6)
    layer = keras_attn.MultiHeadAttention(2, 4, key_size=8)
    output = to_numpy(layer(query))
    permuted = to_numpy(layer(query[:, permutation]))
    np.testing.assert_allclose(permuted, output[:, permutation], atol=1e-5)
    # A causal mask breaks the symmetry, so the check is able to fail.
    causal = to_numpy(layer(query[:, permutation], use_causal_mask=True))
    assert np.abs(causal - to_numpy(layer(query, use_causal_mask=True))[:, permutation]).max() > 1e-4


def test_implicit_keras_mask_is_honoured():
    tokens = np.array([[5, 3, 8, 0, 0], [4, 9, 2, 7, 1]], "int32")
    token_input = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(12, 8, mask_zero=True)
    layer = keras_attn.MultiHeadAttention(2, 4)
    attended = layer(embedding(token_input))
    pooled = keras.layers.GlobalAveragePooling1D()(attended)
    model = keras.Model(token_input, [attended, pooled])
    output, pooled_output = (to_numpy(t) for t in model(tokens))

    # Real positions see only real tokens: the padded sequence gives the same
    # result as the unpadded one.
    unpadded = to_numpy(model(tokens[:1, :3])[0])
    np.testing.assert_allclose(output[0, :3], unpadded[0], atol=1e-6)
    # Equal to an explicit mask on keys and queries.
    keep = tokens != 0
    explicit = to_numpy(
        layer(embedding(tokens), attention_mask=keep[:, :, None] & keep[:, None, :])
    )
    np.testing.assert_allclose(output, explicit, atol=1e-6)
    # The output carries the mask: downstream pooling averages real positions.
    np.testing.assert_allclose(pooled_output[0], output[0, :3].mean(axis=0), atol=1e-6)


def test_cross_attention_with_key_distinct_from_value():
    query, value, key = random(2, 3, 8), random(2, 5, 6), random(2, 5, 4)
    layer = keras_attn.MultiHeadAttention(2, 4, key_size=6, out_dim=5)
    output = layer(query, value, key)
    expected, _ = reference.attention(layer, query, value, key)
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)


def test_invalid_arguments_are_reported():
    with pytest.raises(ValueError, match="heads"):
        keras_attn.MultiHeadAttention(0, 4)
    with pytest.raises(ValueError, match="key_size"):
        keras_attn.MultiHeadAttention(2, 4, key_size=-1)
    with pytest.raises(ValueError, match="attention_dropout"):
        keras_attn.MultiHeadAttention(2, 4, attention_dropout=1.5)
    with pytest.raises(ValueError, match="same length"):
        keras_attn.MultiHeadAttention(2, 4)(random(1, 3, 8), random(1, 4, 8), random(1, 5, 8))


def test_dropout_is_active_only_in_training():
    query = random(2, 6, 8)
    layer = keras_attn.MultiHeadAttention(2, 4, attention_dropout=0.5)
    inference = to_numpy(layer(query))
    np.testing.assert_allclose(to_numpy(layer(query, training=False)), inference)
    trained = to_numpy(layer(query, training=True))
    assert np.abs(trained - inference).max() > 1e-4
    # Inference with dropout configured equals the reference without dropout.
    np.testing.assert_allclose(inference, reference.attention(layer, query)[0], atol=1e-5)


ATTENTION_LAYERS = [
    (keras_attn.MultiHeadAttention, {"fused_attention": True}),
    (keras_attn.MultiHeadAttention, {"fused_attention": False}),
    (keras_attn.TalkingHeadsAttention, {}),
]


@pytest.mark.parametrize("layer_cls, options", ATTENTION_LAYERS)
@pytest.mark.parametrize(
    "value_length, key_length", [(3, 5), (1, 5), (5, 1)], ids=["3-5", "1-5", "5-1"]
)
def test_built_layer_checks_key_and_value_lengths_at_every_call(
    layer_cls, options, value_length, key_length
):
    """Built on self-attention, then reused: a length of 1 would broadcast
    silently in the einsum and in the fused kernels."""
    query = random(2, 5, 8)
    layer = layer_cls(2, 4, **options)
    layer(query)
    value, key = random(2, value_length, 8), random(2, key_length, 8)
    expected = (
        f"`key` and `value` must have the same length; received key shape "
        f"\\(2, {key_length}, 8\\) and value shape \\(2, {value_length}, 8\\)"
    )
    with pytest.raises(ValueError, match=expected):
        layer(query, value, key)


@pytest.mark.parametrize("layer_cls, options", ATTENTION_LAYERS)
def test_built_layer_checks_widths_batches_ranks_and_masks(layer_cls, options):
    query = random(2, 5, 8)
    layer = layer_cls(2, 4, **options)
    layer(query)
    with pytest.raises(ValueError, match=r"built for `key` with 8 features; received key shape \(2, 5, 6\)"):
        layer(query, random(2, 5, 8), random(2, 5, 6))
    with pytest.raises(ValueError, match=r"built for `query` with 8 features; received query shape \(2, 5, 6\)"):
        layer(random(2, 5, 6), query)
    with pytest.raises(ValueError, match=r"same batch size; received value shape \(1, 5, 8\)"):
        layer(query, random(1, 5, 8))
    with pytest.raises(ValueError, match=r"`query` must have rank 3.*\(5, 8\)"):
        layer(query[0])
    with pytest.raises(ValueError, match=r"`attention_mask` of shape \(2, 5, 4\) does not broadcast to \(2, 5, 7\)"):
        layer(query, random(2, 7, 8), attention_mask=np.ones((2, 5, 4), bool))
    # Shapes that agree (or broadcast as documented) still work.
    output = layer(query, random(2, 7, 8), attention_mask=np.ones((2, 1, 7), bool))
    assert tuple(output.shape) == (2, 5, 8)


def test_lengths_unknown_while_tracing_are_accepted():
    query = keras.Input((None, 8))
    value = keras.Input((None, 8))
    model = keras.Model([query, value], keras_attn.MultiHeadAttention(2, 4)(query, value))
    assert to_numpy(model([random(1, 3, 8), random(1, 6, 8)])).shape == (1, 3, 8)


def test_blockwise_attention_needs_a_window():
    with pytest.raises(ValueError, match="`blockwise_attention=True` needs `attention_window`"):
        keras_attn.MultiHeadAttention(2, 4, blockwise_attention=True)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"attention_window": 3, "blockwise_attention": True}, "blockwise attention .* is causal"),
        ({"position": keras_attn.layers.XPos()}, r"position=XPos\(.*\) is for causal attention"),
    ],
    ids=["blockwise", "xpos"],
)
def test_causal_only_options_reject_bidirectional_calls(options, message):
    query = random(1, 10, 8)
    layer = keras_attn.MultiHeadAttention(2, 4, **options)
    with pytest.raises(ValueError, match=message):
        layer(query)
    with pytest.raises(ValueError, match=message):
        keras_attn.MultiHeadAttention(2, 4, **options)(keras.Input((None, 8)))
    assert np.all(np.isfinite(to_numpy(layer(query, use_causal_mask=True))))
    # Rotary encodings are fine bidirectionally.
    keras_attn.MultiHeadAttention(2, 4, position_encoding="rotary")(query)


@pytest.fixture
def global_policy():
    """Sets the global dtype policy for one test, restoring float32 after."""
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy("float32")


def attention_model(fused_attention):
    query = keras.Input((6, 8))
    attended = keras_attn.MultiHeadAttention(
        2, 4, key_size=4, fused_attention=fused_attention, name="attention"
    )(query, use_causal_mask=True)
    output = keras.layers.Activation("linear", dtype="float32")(attended)
    return keras.Model(query, output)


@pytest.mark.parametrize("fused_attention", [True, False])
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_fit_step(policy, fused_attention, global_policy):
    """Fine-tuning under a mixed policy: one compiled fit step (jit on TF and
    JAX, where float16 on XLA's CPU backend once broke the fused kernel), a
    finite loss, and the compiled forward pass close to float32's."""
    reference_model = attention_model(fused_attention)
    global_policy(policy)
    model = attention_model(fused_attention)
    assert model.get_layer("attention").compute_dtype == policy.split("_")[1]
    model.set_weights(reference_model.get_weights())
    model.compile(optimizer="sgd", loss="mse", jit_compile=supports_jit())
    query = random(4, 6, 8)
    np.testing.assert_allclose(
        model.predict(query, verbose=0), to_numpy(reference_model(query)), atol=0.05, rtol=0
    )
    history = model.fit(query, random(4, 6, 8), batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert all(np.all(np.isfinite(to_numpy(w))) for w in model.trainable_weights)
