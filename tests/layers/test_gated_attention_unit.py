"""GatedAttentionUnit against GAU's formulas written in numpy here (Hua et
al. 2022; bert4keras's `GatedAttentionUnit` and `attention_normalize`), for
the three normalisations, under padding and causal masks."""

import numpy as np
import pytest

import keras_attn
from tests import reference
from tests.harness import run_layer_test
from tests.harness import to_numpy

NORMALIZATIONS = ("softmax", "squared_relu", "softmax_plus")
RNG = np.random.default_rng(20)


def random(*shape):
    return RNG.normal(size=shape).astype("float32")


def weight(layer, name):
    return to_numpy(getattr(layer, name)).astype(np.float64)


def gau(layer, x, attention_mask=None, causal=False, rotary=False):
    """GAU in float64: `[u, v, z] = swish(x W_i + b_i)`, `q, k = z * gamma +
    beta` (RoPE'd when `rotary`), `A = normalize(q k^T / sqrt(s))` over the
    keys each row sees (`n` of them), `out = (u * A v) W_o + b_o`."""
    x = np.asarray(x, np.float64)
    batch, length, _ = x.shape
    units, key_size = layer.units, layer.key_size
    hidden = reference.dense(x, layer.input_dense)
    hidden = hidden / (1.0 + np.exp(-hidden))  # swish
    u, v, z = hidden[..., :units], hidden[..., units:2 * units], hidden[..., 2 * units:]
    q = z * weight(layer, "query_scale")
    k = z * weight(layer, "key_scale")
    if layer.use_bias:
        q, k = q + weight(layer, "query_offset"), k + weight(layer, "key_offset")
    if rotary:
        q = reference.rope(q[:, :, None])[:, :, 0]
        k = reference.rope(k[:, :, None])[:, :, 0]
    scores = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(key_size)
    keep = np.ones((batch, length, length), bool)
    if attention_mask is not None:
        keep &= np.asarray(attention_mask, bool)
    if causal:
        keep &= np.tril(np.ones((length, length), bool))
    weights = np.zeros_like(scores)
    for b, i in np.ndindex(batch, length):
        row, seen = scores[b, i], keep[b, i]
        n = seen.sum()
        if n == 0:
            continue
        if layer.normalization == "softmax":
            weights[b, i, seen] = reference.softmax(row[seen])
        elif layer.normalization == "squared_relu":
            weights[b, i, seen] = np.maximum(row[seen], 0.0) ** 2 / n
        else:  # softmax_plus
            weights[b, i, seen] = reference.softmax(
                row[seen] * np.log(max(n, 16)) / np.log(512)
            )
    return reference.dense(u * np.einsum("bqk,bkd->bqd", weights, v), layer.output_dense)


def padding_mask(batch=2, length=6):
    """Key padding for the second sequence, and one query row with no key."""
    mask = np.ones((batch, length, length), bool)
    mask[1, :, 4:] = False
    mask[0, 2, :] = False
    return mask


@pytest.mark.parametrize("causal", [False, True], ids=["padding", "causal+padding"])
@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_layer_harness(normalization, causal, tmp_path):
    init_kwargs = {"units": 6, "key_size": 4, "normalization": normalization}

    def numpy_reference(layer, inputs):
        return gau(layer, inputs["query"], inputs["attention_mask"], causal=causal)

    layer = run_layer_test(
        keras_attn.layers.GatedAttentionUnit,
        init_kwargs,
        # Halved: squared ReLU of a row with one key squares scores of
        # order 1, which bfloat16 would round by more than the harness's
        # mixed-precision tolerance.
        inputs={"query": 0.5 * random(2, 6, 8), "attention_mask": padding_mask()},
        expected_output_shape=(2, 6, 8),
        call_kwargs={"use_causal_mask": True} if causal else None,
        reference=numpy_reference,
        tmp_path=tmp_path,
    )
    assert layer.get_config()["normalization"] == normalization


@pytest.fixture(scope="module")
def x():
    # Longer than softmax_plus's floor of 16 keys, so `n` matters.
    return random(2, 20, 8)


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "einsum"])
def test_causal_and_padding_with_rotary_positions(normalization, fused, x):
    """Each query row normalises over the keys it sees: the causal prefix
    without the padded keys (`n` = that count)."""
    layer = keras_attn.layers.GatedAttentionUnit(
        units=6, key_size=4, normalization=normalization, position_encoding="rotary",
        fused_attention=fused,
    )
    mask = np.ones((2, 20, 20), bool)
    mask[1, :, 17:] = False
    layer(x)  # builds
    # Random offsets (initialised to zeros), so that they matter.
    layer.query_offset.assign(random(4))
    layer.key_offset.assign(random(4))
    output = to_numpy(layer(x, attention_mask=mask, use_causal_mask=True))
    expected = gau(layer, x, mask, causal=True, rotary=True)
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_softmax_plus_counts_the_keys_a_row_sees(x):
    """On 20 keys without a mask, softmax_plus's scale is log(20)/log(512),
    not the floor's log(16)/log(512): the plain softmax of the scaled
    scores, checked through the returned weights."""
    layer = keras_attn.layers.GatedAttentionUnit(units=6, key_size=4, normalization="softmax_plus")
    _, weights = layer(x, return_attention_scores=True)
    plain = keras_attn.layers.GatedAttentionUnit(units=6, key_size=4, normalization="softmax")
    plain(x)
    plain.set_weights(layer.get_weights())
    _, plain_weights = plain(x, return_attention_scores=True)
    logits = np.log(to_numpy(plain_weights).astype(np.float64))  # up to a row constant
    expected = reference.softmax(logits * np.log(20) / np.log(512))
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-5)


def test_parameters():
    layer = keras_attn.layers.GatedAttentionUnit(units=6, key_size=4, use_bias=False)
    layer(random(1, 3, 8))
    assert sorted(w.path.split("/", 1)[1] for w in layer.weights) == [
        "input_dense/kernel", "key_scale", "output_dense/kernel", "query_scale",
    ]
    assert layer.input_dense.kernel.shape == (8, 2 * 6 + 4)
    assert layer.output_dense.kernel.shape == (6, 8)


def test_bad_normalization_names_the_allowed_ones():
    allowed = r"\('softmax', 'squared_relu', 'softmax_plus'\).*'sparsemax'"
    with pytest.raises(ValueError, match=allowed):
        keras_attn.layers.GatedAttentionUnit(units=6, key_size=4, normalization="sparsemax")
    with pytest.raises(ValueError, match=allowed):
        keras_attn.MultiHeadAttention(2, 4, normalization="sparsemax")


def test_softmax_plus_refuses_a_second_log_n_scaling():
    with pytest.raises(ValueError, match="log_n_train_length=64"):
        keras_attn.layers.GatedAttentionUnit(
            units=6, key_size=4, normalization="softmax_plus", log_n_train_length=64
        )


def test_self_attention_only(x):
    layer = keras_attn.layers.GatedAttentionUnit(units=6, key_size=4)
    with pytest.raises(ValueError, match="without `value` and `key`"):
        layer(x, value=random(2, 20, 8))
    with pytest.raises(ValueError, match="heads=2"):
        keras_attn.layers.GatedAttentionUnit(units=6, key_size=4, heads=2)
    with pytest.raises(ValueError, match="self-attention only"):
        layer.project_key_value(x)
