"""StreamingLLM's sink tokens in cached generation: a model built with
`attention_window=w` and `attention_sink_tokens=k` (here with learned sink
logits too, `attention_sinks=True`) decodes with a cache of `k + w` slots,
the first `k` positions kept beside the window's ring, and gives at every
step what a full-attention twin with the same weights gives under the mask
`j <= i and (i - j < w or j < k)`, built here in numpy."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation.cached_forward import CachedForward
from keras_attn.torch_runtime.compiled_step import torch_compiles_steps
from tests.harness import to_numpy
from tests.torch_runtime.test_compiled_step import dynamo_counts

WINDOW, SINKS, PROMPT, LENGTH = 4, 2, 3, 24
CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, intermediate_size=32, max_position_embeddings=64,
    pad_token_id=0,
    # Weights large enough that greedy decoding does not repeat one token.
    initializer_range=0.5,
)


def streaming_mask(length, window=WINDOW, sinks=SINKS):
    """`(1, length, length)`: `j <= i` and (`i - j < window` or `j < sinks`)."""
    i = np.arange(length)[:, None]
    j = np.arange(length)[None, :]
    return ((j <= i) & ((i - j < window) | (j < sinks)))[None]


@pytest.fixture(scope="module")
def models():
    """The streaming model, and its full-attention twin with the same weights."""
    keras.utils.set_random_seed(0)
    streaming = keras_attn.build_transformer_model(
        CONFIG, variant="llama", application="lm", attention_window=WINDOW,
        attention_sink_tokens=SINKS, attention_sinks=True,
    )
    rng = np.random.default_rng(0)
    for variable in streaming.weights:
        if variable.path.endswith("sink_logits"):
            variable.assign(rng.normal(size=variable.shape).astype("float32"))
    twin = keras_attn.build_transformer_model(
        CONFIG, variant="llama", application="lm", attention_sinks=True
    )
    twin.set_weights(streaming.get_weights())
    return streaming, twin


def masked_pass(model, token_ids, mask):
    """`model`'s logits with the blocks attending under `mask` (and causality):
    the template's own hooks, the mask given explicitly."""
    template = model.template
    hidden = template.embed(token_ids)
    for block in template.blocks:
        hidden = block(hidden, attention_mask=mask, use_causal_mask=True)
    hidden = template.finish_blocks(hidden, None)
    return to_numpy(template.language_model_head(hidden, None))


def token_ids(length=LENGTH):
    return np.random.default_rng(1).integers(1, CONFIG["vocab_size"], size=(2, length)).astype("int32")


def test_full_pass_is_the_masked_twin(models):
    streaming, twin = models
    ids = token_ids()
    expected = masked_pass(twin, ids, streaming_mask(LENGTH))
    np.testing.assert_allclose(to_numpy(streaming(ids)), expected, atol=1e-5, rtol=1e-5)
    # The sink tokens matter: the window alone gives other logits past it.
    window_only = masked_pass(twin, ids, streaming_mask(LENGTH, sinks=0))
    assert np.abs(window_only[:, WINDOW + 1 :] - expected[:, WINDOW + 1 :]).max() > 1e-3


def test_cached_steps_keep_the_sinks_in_a_flat_cache(models):
    streaming, twin = models
    ids = token_ids()
    expected = masked_pass(twin, ids, streaming_mask(LENGTH))
    forward = CachedForward(streaming)
    # Memory: k + window slots, however long the sequence.
    assert forward.capacity(PROMPT, LENGTH) == SINKS + WINDOW
    assert forward.capacity(PROMPT, 10_000) == SINKS + WINDOW
    cache = forward.empty_cache(2, forward.capacity(PROMPT, LENGTH))
    logits, cache = forward(ids[:, :PROMPT], 0, cache)
    np.testing.assert_allclose(to_numpy(logits), expected[:, :PROMPT], atol=1e-5, rtol=1e-5)
    for position in range(PROMPT, LENGTH):
        logits, cache = forward(ids[:, position : position + 1], position, cache)
        np.testing.assert_allclose(
            to_numpy(logits)[:, 0], expected[:, position], atol=1e-5, rtol=1e-5,
            err_msg=f"position {position}",
        )
        held = to_numpy(cache.key_positions)
        assert list(held[:SINKS]) == list(range(SINKS)), held
        ring = sorted(p for p in held[SINKS:] if p >= 0)
        assert ring == list(range(max(SINKS, position - WINDOW + 1), position + 1)), held


def test_greedy_generation_is_the_masked_twins(models):
    streaming, twin = models
    prompt = [5, 9, 2]
    new = 16
    before = dynamo_counts()
    generated = streaming.generate([prompt], max_new_tokens=new)[0]
    if torch_compiles_steps():
        # One graph: the sink softmax's maximum traces (torch's `ops.max`
        # broke the step into 28 graphs).
        graphs, breaks, _ = np.subtract(dynamo_counts(), before)
        assert (graphs, breaks) == (1, 0), f"{graphs} graphs, {breaks} breaks"
    # One buffer of the final length (one shape for every reference pass):
    # the causal mask hides the positions not filled yet.
    buffer = np.ones((1, len(prompt) + new), "int32")
    buffer[0, : len(prompt)] = prompt
    for position in range(len(prompt), buffer.shape[1]):
        # A generated pad id (0) is padding, as in the model's full pass:
        # never a key.
        logits = masked_pass(twin, buffer, streaming_mask(buffer.shape[1]) & (buffer[:, None] != 0))
        buffer[0, position] = int(np.argmax(logits[0, position - 1]))
    assert list(generated) == list(buffer[0, len(prompt) :])
    assert len(set(generated)) > 3, generated


def test_keras_round_trip_keeps_sink_logits_and_tokens(models, tmp_path):
    streaming, _ = models
    path = str(tmp_path / "streaming.keras")
    streaming.save(path)
    restored = keras.models.load_model(path)
    ids = token_ids(12)
    np.testing.assert_allclose(to_numpy(restored(ids)), to_numpy(streaming(ids)), atol=1e-6)
    sinks = {v.path: to_numpy(v) for v in streaming.weights if v.path.endswith("sink_logits")}
    assert sinks and all(np.any(value != 0) for value in sinks.values())
    for variable in restored.weights:
        if variable.path in sinks:
            np.testing.assert_array_equal(to_numpy(variable), sinks.pop(variable.path))
    assert not sinks
    attention = restored.template.blocks[0].attention
    assert (attention.attention_window, attention.attention_sink_tokens) == (WINDOW, SINKS)


@pytest.mark.parametrize("overrides, message", [
    (dict(attention_sink_tokens=-1, attention_window=4), r"attention_sink_tokens"),
    (dict(attention_sink_tokens=2), r"needs `attention_window`"),
    (dict(attention_sink_tokens=2, attention_window=4, blockwise_attention=True),
     r"blockwise_attention=True"),
])
def test_bad_sink_tokens_are_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.build_transformer_model(CONFIG, variant="llama", application="lm", **overrides)


def test_a_cache_without_room_for_a_ring_is_an_error(models):
    streaming, _ = models
    forward = CachedForward(streaming)
    with pytest.raises(ValueError, match=r"cache of 2 slots cannot hold the 2 sink tokens"):
        forward(token_ids()[:, :1], 0, forward.empty_cache(2, SINKS))


def test_a_distance_bias_model_refuses_a_sink_cache():
    model = keras_attn.build_transformer_model(
        dict(CONFIG, num_key_value_heads=None), variant="alibi", application="lm",
        attention_window=WINDOW, attention_sink_tokens=SINKS,
    )
    with pytest.raises(ValueError, match=r"sink_tokens=2 and a position bias"):
        CachedForward(model)
