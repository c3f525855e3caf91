"""Every cached step computes what the full pass computes for its prefix."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import CachedForward
from tests.harness import to_numpy

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=48, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2, type_vocab_size=2,
)
LENGTH, PROMPT = 16, 6

CASES = [
    ("bert", "lm", {}),
    ("bert", "unilm", {}),
    ("roberta", "lm", {"type_vocab_size": 1}),
    ("roberta+", "lm", {"attention_key_size": 12}),
    ("roberta+", "unilm", {"attention_key_size": 12, "embedding_size": 8}),
    ("talking_heads", "lm", {}),
    ("sinusoidal", "lm", {}),
    ("roformer", "lm", {}),
    ("roformer", "unilm", {"attention_window": 6}),
    ("alibi", "lm", {"attention_window": 5}),
    ("alibi", "unilm", {}),
    ("kerple_log", "lm", {"log_n_train_length": 4}),
    ("kerple_power", "lm", {"attention_window": 4}),
    ("sandwich", "lm", {}),
    ("xpos", "lm", {}),
    ("xpos", "lm", {"attention_window": 4, "blockwise_attention": True}),
    ("bert", "lm", {"attention_window": 4, "log_n_train_length": 3}),
    ("albert", "lm", {"embedding_size": 8}),
    ("albert", "unilm", {}),
]


def sequences(pad_token_id, seed=0):
    ids = np.random.default_rng(seed).integers(3, CONFIG["vocab_size"], size=(2, LENGTH))
    ids[1, 2] = pad_token_id  # a padding token inside a sequence is masked as a key
    return ids.astype("int32")


@pytest.mark.parametrize("variant, application, options", CASES)
def test_each_cached_step_equals_the_full_pass(variant, application, options):
    model = keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, **options
    )
    forward = CachedForward(model)
    ids = sequences(forward.pad_token_id)
    inputs = {"token_ids": ids}
    unilm = application == "unilm"
    if "segment_ids" in model.input:
        segments = np.zeros_like(ids)
        if unilm:
            segments[:, PROMPT:] = 1
        inputs["segment_ids"] = segments
    full = to_numpy(model(inputs))
    capacity = forward.capacity(PROMPT, LENGTH)
    if options.get("attention_window"):
        assert capacity < LENGTH  # a ring: it wraps around several times
    cache = forward.empty_cache(2, capacity)
    logits, cache = forward(
        ids[:, :PROMPT], 0, cache,
        segment_ids=np.zeros((2, PROMPT), "int32") if unilm else None, causal=not unilm,
    )
    np.testing.assert_allclose(to_numpy(logits)[:, -1], full[:, PROMPT - 1], atol=1e-5, rtol=1e-5)
    if not unilm:
        np.testing.assert_allclose(to_numpy(logits), full[:, :PROMPT], atol=1e-5, rtol=1e-5)
    for position in range(PROMPT, LENGTH):
        logits, cache = forward(
            ids[:, position : position + 1], position, cache,
            segment_ids=np.ones((2, 1), "int32") if unilm else None,
        )
        np.testing.assert_allclose(
            to_numpy(logits)[:, 0], full[:, position], atol=1e-5, rtol=1e-5,
            err_msg=f"position {position}",
        )


@pytest.fixture
def restore_policy():
    previous = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(previous)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_generation_stays_finite(policy, restore_policy):
    """XPOS keys cached at their positions and decayed per step, a windowed
    ring, log-n scaling: every step's logits finite in half precision, and
    sampled tokens within the vocabulary."""
    keras.config.set_dtype_policy(policy)
    for variant, options in [
        ("alibi", {"log_n_train_length": 4}),
        ("xpos", {"attention_window": 4}),
    ]:
        model = keras_attn.build_transformer_model(
            CONFIG, variant=variant, application="lm", **options
        )
        forward = CachedForward(model)
        ids = sequences(forward.pad_token_id)
        cache = forward.empty_cache(2, forward.capacity(PROMPT, LENGTH))
        logits, cache = forward(ids[:, :PROMPT], 0, cache)
        steps = [to_numpy(keras.ops.cast(logits, "float32"))]
        for position in range(PROMPT, LENGTH):
            logits, cache = forward(ids[:, position : position + 1], position, cache)
            steps.append(to_numpy(keras.ops.cast(logits, "float32")))
        assert all(np.isfinite(step).all() for step in steps), variant
    # The compiled loop too (XPOS's ring, the last model built).
    generated = model.generate([[2, 5, 7], [3, 4]], max_new_tokens=12, sampler="top_p", seed=1)
    assert ((generated >= 0) & (generated < CONFIG["vocab_size"])).all()
