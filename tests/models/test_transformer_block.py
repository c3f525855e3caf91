"""`TransformerBlock`: post-LN and pre-LN, with and without cross-attention,
against a numpy block written here, and every cached decoding step against
the full pass."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers import CacheStep
from keras_attn.layers import KeyValueCache
from keras_attn.models.passes import DecodeStep
from tests import reference
from tests.harness import to_numpy

WIDTH, LENGTH, SOURCE = 16, 7, 5


def make_block(norm_first, cross):
    def norm(name):
        return keras.layers.LayerNormalization(epsilon=1e-6, name=name)

    def attention(name):
        return keras_attn.MultiHeadAttention(heads=2, head_size=8, key_size=6, name=name)

    layers = dict(
        attention=attention("attention"),
        feed_forward=keras_attn.layers.FeedForward(24, activation="relu", name="feed_forward"),
        attention_norm=norm("attention_norm"),
        feed_forward_norm=norm("feed_forward_norm"),
        attention_dropout=keras.layers.Dropout(0.0),
        feed_forward_dropout=keras.layers.Dropout(0.0),
        attention_add=keras.layers.Add(),
        feed_forward_add=keras.layers.Add(),
    )
    if cross:
        layers.update(
            cross_attention=attention("cross_attention"),
            cross_attention_norm=norm("cross_attention_norm"),
            cross_attention_dropout=keras.layers.Dropout(0.0),
            cross_attention_add=keras.layers.Add(),
        )
    return keras_attn.TransformerBlock(norm_first=norm_first, **layers)


def numpy_block(block, x, encoder_output, encoder_mask):
    """The block's definition in float64 numpy."""

    def norm(layer, h):
        mean = h.mean(-1, keepdims=True)
        variance = ((h - mean) ** 2).mean(-1, keepdims=True)
        gamma, beta = (to_numpy(w).astype(np.float64) for w in (layer.gamma, layer.beta))
        return (h - mean) / np.sqrt(variance + layer.epsilon) * gamma + beta

    def feed_forward(h):
        inner = np.maximum(reference.dense(h, block.feed_forward.intermediate_dense), 0.0)
        return reference.dense(inner, block.feed_forward.output_dense)

    def sublayer(layer_norm, transform, h):
        if block.norm_first:
            return h + transform(norm(layer_norm, h))
        return norm(layer_norm, h + transform(h))

    h = np.asarray(x, np.float64)
    h = sublayer(
        block.attention_norm,
        lambda q: reference.attention(block.attention, q, use_causal_mask=True)[0],
        h,
    )
    if block.cross_attention is not None:
        h = sublayer(
            block.cross_attention_norm,
            lambda q: reference.attention(
                block.cross_attention, q, value=encoder_output,
                attention_mask=np.broadcast_to(encoder_mask, (len(q), LENGTH, SOURCE)),
            )[0],
            h,
        )
    return sublayer(block.feed_forward_norm, feed_forward, h)


def randomize(block):
    """Non-trivial norms: gamma and beta away from 1 and 0."""
    rng = np.random.default_rng(3)
    for layer in block.layers:
        if isinstance(layer, keras.layers.LayerNormalization):
            layer.gamma.assign(rng.uniform(0.5, 1.5, WIDTH).astype("float32"))
            layer.beta.assign(rng.normal(0, 0.3, WIDTH).astype("float32"))


@pytest.mark.parametrize("norm_first, cross", [(False, False), (True, True), (False, True)])
def test_block_equals_numpy_and_its_cached_steps_equal_the_full_pass(norm_first, cross):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, LENGTH, WIDTH)).astype("float32")
    encoder_output = rng.normal(size=(2, SOURCE, WIDTH)).astype("float32") if cross else None
    # The second row's last encoder position is padding.
    encoder_mask = np.ones((2, 1, SOURCE), bool)
    encoder_mask[1, 0, -1] = False
    encoder_mask = encoder_mask if cross else None
    block = make_block(norm_first, cross)
    block(x, use_causal_mask=True, encoder_output=encoder_output, encoder_mask=encoder_mask)
    randomize(block)
    full = to_numpy(
        block(x, use_causal_mask=True, encoder_output=encoder_output, encoder_mask=encoder_mask)
    )
    np.testing.assert_allclose(
        full, numpy_block(block, x, encoder_output, encoder_mask), atol=1e-5, rtol=1e-5
    )

    attention = block.attention
    cache = KeyValueCache.empty(2, LENGTH, 2, attention.key_size, 2, attention.head_size, "float32")
    key_positions = np.full((LENGTH,), -1, "int32")
    for position in range(LENGTH):
        key_positions[position] = position
        step = DecodeStep(CacheStep(
            np.array(position, "int32"), np.array([position], "int32"), key_positions.copy()
        ))
        visible = np.broadcast_to((key_positions >= 0)[None, None, :], (2, 1, LENGTH))
        hidden, cache = block(
            x[:, position : position + 1], attention_mask=visible, cache=cache,
            step=step, encoder_output=encoder_output, encoder_mask=encoder_mask,
        )
        np.testing.assert_allclose(
            to_numpy(hidden)[:, 0], full[:, position], atol=1e-5, rtol=1e-5,
            err_msg=f"position {position}",
        )


def test_a_cross_attention_block_needs_the_encoder_output_and_all_four_layers():
    block = make_block(norm_first=True, cross=True)
    with pytest.raises(ValueError, match="give `encoder_output`"):
        block(np.zeros((1, 3, WIDTH), "float32"), use_causal_mask=True)
    layers = {
        name: getattr(block, name)
        for name in ("attention", "feed_forward", "attention_norm", "feed_forward_norm",
                     "attention_dropout", "feed_forward_dropout", "attention_add",
                     "feed_forward_add")
    }
    with pytest.raises(ValueError, match="needs all of"):
        keras_attn.TransformerBlock(cross_attention=block.cross_attention, **layers)
