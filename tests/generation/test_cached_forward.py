"""Every cached step computes what the full pass computes for its prefix."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import CachedForward
from keras_attn.generation.cached_forward import GENERATIVE_APPLICATIONS
from keras_attn.layers.packed import PackedRows
from keras_attn.torch_runtime.compiled_step import torch_compiles_steps
from keras_attn.models import VARIANTS
from keras_attn.models.passes import FULL_PASS
from tests.torch_runtime.test_compiled_step import dynamo_counts
from tests.harness import to_numpy

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=48, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2, type_vocab_size=2,
)
LENGTH, PROMPT = 16, 6

# Options a variant's cases add to CONFIG: its checkpoint family's shape
# (RoBERTa's single token type, RoBERTa+'s decoupled widths, ALBERT's
# factorised embeddings).
OPTIONS = {
    "roberta": {"type_vocab_size": 1},
    "roberta+": {"attention_key_size": 12, "embedding_size": 8},
    "albert": {"embedding_size": 8},
    # T5 v1.1 and mT5: an untied head and a gated feed-forward.
    "t5.1.1": {"tie_word_embeddings": False, "feed_forward_gated": True},
    "mt5.1.1": {"tie_word_embeddings": False, "attention_head_size": 6},
    # RoFormer-v2's factorised head (`Output-Mapping`).
    "roformer_v2": {"embedding_size": 8},
}
# Windows, rings and log-n scaling, on top of each variant's plain cases.
WINDOWED_CASES = [
    ("roformer", "unilm", {"attention_window": 6}),
    ("roformer", "lm", {"rotary_value": True}),
    ("alibi", "lm", {"attention_window": 5}),
    ("kerple_log", "lm", {"log_n_train_length": 4}),
    ("kerple_power", "lm", {"attention_window": 4}),
    ("xpos", "lm", {"attention_window": 4, "blockwise_attention": True}),
    ("bert", "lm", {"attention_window": 4, "log_n_train_length": 3}),
    ("albert", "unilm", {"attention_window": 5}),
    # NEZHA's relative terms from the ring's slot positions, clipped inside
    # the window and past it.
    ("nezha", "lm", {"attention_window": 4, "max_relative_position": 2}),
    ("nezha", "unilm", {"attention_window": 6, "max_relative_position": 8}),
]


class PreNormBert(keras_attn.Transformer):
    """A variant whose blocks are pre-LN (GPT-2's order)."""

    norm_first = True


class LogDistanceBias(keras_attn.layers.RelativePositionBias):
    """A position bias defined here: `-c_h log(1 + |i - j|)`, a slope per head."""

    def __init__(self, heads, **kwargs):
        super().__init__(**kwargs)
        self.heads = heads

    def bias(self, distance):
        slopes = keras.ops.arange(1, self.heads + 1, dtype="float32") * 0.7
        magnitude = keras.ops.log1p(keras.ops.abs(keras.ops.cast(distance, "float32")))
        return -keras.ops.reshape(slopes, (-1,) + (1,) * len(distance.shape)) * magnitude[None]


class LogDistanceBert(keras_attn.Transformer):
    """A variant with its own relative position bias and no position table."""

    def make_position_embedding(self):
        return None

    def make_position_bias(self):
        return LogDistanceBias(self.config.num_heads, name="Position-Bias")


# Variants registered by the test, with the registry's own.
TEST_VARIANTS = {"test_pre_norm": PreNormBert, "test_log_distance": LogDistanceBert}


def generative_cases():
    """Every registered variant x every generative application it builds."""
    variants = dict(VARIANTS, **TEST_VARIANTS)
    for name, variant_class in variants.items():
        for application in variant_class.applications:
            if application in GENERATIVE_APPLICATIONS:
                yield name, application, OPTIONS.get(name, {})


CASES = list(generative_cases()) + WINDOWED_CASES


def test_the_cases_cover_the_registry():
    """A variant registered later joins the cases by itself; this fails if
    the cases stop being drawn from the registry."""
    covered = {variant for variant, _, _ in CASES}
    generative = {
        name for name, cls in VARIANTS.items()
        if set(cls.applications) & set(GENERATIVE_APPLICATIONS)
    }
    assert generative <= covered and set(TEST_VARIANTS) <= covered
    assert {"bert", "roberta", "albert", "xpos", "gpt2", "gpt2_ml", "t5", "mt5.1.1"} <= generative


def sequences(pad_token_id, seed=0):
    ids = np.random.default_rng(seed).integers(3, CONFIG["vocab_size"], size=(2, LENGTH))
    ids[1, 2] = pad_token_id  # a padding token inside a sequence is masked as a key
    return ids.astype("int32")


@pytest.mark.parametrize("variant, application, options", CASES)
def test_each_cached_step_equals_the_full_pass(
    variant, application, options, registered_test_variants
):
    model = keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, **options
    )
    forward = CachedForward(model)
    ids = sequences(forward.pad_token_id)
    inputs = {"token_ids": ids}
    unilm = application == "unilm"
    if "segment_ids" in model.input_contract.names:
        segments = np.zeros_like(ids)
        if unilm:
            segments[:, PROMPT:] = 1
        inputs["segment_ids"] = segments
    source = None
    if application == "seq2seq":
        # An encoder-decoder: the decoder runs on `ids`, attending to a
        # padded source encoded once.
        encoder_ids = sequences(forward.pad_token_id, seed=1)[:, :11]
        encoder_ids[0, 8:] = forward.pad_token_id
        inputs = {"encoder_token_ids": encoder_ids, "decoder_token_ids": ids}
        source = forward.encode_source(encoder_ids, (encoder_ids != 0).astype("int32"))
    full = to_numpy(model(inputs))
    capacity = forward.capacity(PROMPT, LENGTH)
    if options.get("attention_window"):
        assert capacity < LENGTH  # a ring: it wraps around several times
    cache = forward.empty_cache(2, capacity)
    logits, cache = forward(
        ids[:, :PROMPT], 0, cache,
        segment_ids=np.zeros((2, PROMPT), "int32") if unilm else None, source=source,
    )
    np.testing.assert_allclose(to_numpy(logits)[:, -1], full[:, PROMPT - 1], atol=1e-5, rtol=1e-5)
    if not unilm:
        np.testing.assert_allclose(to_numpy(logits), full[:, :PROMPT], atol=1e-5, rtol=1e-5)
        # The head on one token per row (`logits_at`), each row its own.
        picked, _ = forward(
            ids[:, :PROMPT], 0, forward.empty_cache(2, capacity), source=source,
            logits_at=np.array([[PROMPT - 1, 0], [2, 3]]),
        )
        assert tuple(picked.shape) == (2, 2, full.shape[-1])
        np.testing.assert_allclose(
            to_numpy(picked), full[[[0], [1]], [[PROMPT - 1, 0], [2, 3]]], atol=1e-5, rtol=1e-5
        )
        with pytest.raises(ValueError, match="given together"):
            forward(ids[:, :PROMPT], 0, cache, query_owners=np.zeros((2, PROMPT), "int32"))
        with pytest.raises(ValueError, match="give `query_owners` too"):
            forward(ids[:, :PROMPT], 0, cache, packing=PackedRows(2, 4))
    if not forward.packs_sequences:
        owners = np.zeros((2, PROMPT), "int32")
        with pytest.raises(ValueError, match="cannot pack several sequences"):
            forward(ids[:, :PROMPT], 0, cache, query_owners=owners, key_owners=owners)
    for position in range(PROMPT, LENGTH):
        logits, cache = forward(
            ids[:, position : position + 1], position, cache,
            segment_ids=np.ones((2, 1), "int32") if unilm else None, source=source,
        )
        np.testing.assert_allclose(
            to_numpy(logits)[:, 0], full[:, position], atol=1e-5, rtol=1e-5,
            err_msg=f"position {position}",
        )
    if application == "lm" and capacity >= LENGTH:
        # `generate` on prompts of several lengths: the prompts are encoded
        # in one padded pass, then the shorter rows generate while the
        # longer re-read their prompts (`write_rows`), so a step reads a
        # cache that holds later positions (hidden from it by the causal
        # mask). Here row 0's prompt is the whole sequence, row 1's its
        # first PROMPT tokens.
        cache = forward.empty_cache(2, capacity)
        prompts = np.ones_like(ids)
        prompts[1, PROMPT:] = 0
        _, cache = forward(ids, 0, cache, padding_mask=prompts)
        logits, _ = forward(
            ids[:, PROMPT : PROMPT + 1], PROMPT, cache, write_rows=np.array([False, True])
        )
        np.testing.assert_allclose(
            to_numpy(logits)[:, 0], full[:, PROMPT], atol=1e-5, rtol=1e-5,
            err_msg="a step under a cache that holds later positions",
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
    # The compiled loop too (XPOS's ring, the last model built); on torch its
    # step is one graph in half precision as well (`Layer.__call__` and the
    # fill value of masks both trace).
    before = dynamo_counts()
    generated = model.generate([[2, 5, 7], [3, 4]], max_new_tokens=12, sampler="top_p", seed=1)
    assert ((generated >= 0) & (generated < CONFIG["vocab_size"])).all()
    if torch_compiles_steps():
        assert tuple(np.subtract(dynamo_counts(), before))[:2] == (1, 0)


class OlderHeadBert(keras_attn.Transformer):
    """A head override written for the older `decoding=` argument."""

    def language_model_head(self, hidden, condition=None, decoding=False):
        return super().language_model_head(hidden, condition) * 2.0


def bert_inputs(ids):
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids)}


def build_registered(name, variant_class):
    keras_attn.register_variant(name, variant_class)
    try:
        return keras_attn.build_transformer_model(CONFIG, variant=name, application="lm")
    finally:
        VARIANTS.pop(name)


def test_a_hook_without_step_is_refused_by_name():
    """A decoding step tells every hook that it decodes by `step=`; a hook
    that cannot take it builds and runs its full pass, and decoding refuses
    it by name before compiling anything."""
    model = build_registered("test_older_head", OlderHeadBert)
    assert model(bert_inputs(sequences(0))).shape == (2, LENGTH, CONFIG["vocab_size"])
    with pytest.raises(TypeError, match=r"OlderHeadBert.language_model_head takes no "
                                        r"`step` \(it takes `decoding=`"):
        CachedForward(model)


def cached_logits_equal_the_full_pass(model):
    forward = CachedForward(model)
    ids = sequences(forward.pad_token_id)
    full = to_numpy(model(bert_inputs(ids)))
    cache = forward.empty_cache(2, forward.capacity(PROMPT, LENGTH))
    logits, cache = forward(ids[:, :PROMPT], 0, cache)
    np.testing.assert_allclose(to_numpy(logits), full[:, :PROMPT], atol=1e-5, rtol=1e-5)
    logits, _ = forward(ids[:, PROMPT : PROMPT + 1], PROMPT, cache)
    np.testing.assert_allclose(to_numpy(logits)[:, 0], full[:, PROMPT], atol=1e-5, rtol=1e-5)


def test_a_hook_written_once_with_step_runs_in_both_passes():
    """An override taking `step=` and running its layers by `step.run` is
    the same code in the full pass and a decoding step: its doubled logits
    are cached too."""

    class StepHeadBert(keras_attn.Transformer):
        def language_model_head(self, hidden, condition=None, step=FULL_PASS):
            return super().language_model_head(hidden, condition, step) * 2.0

    model = build_registered("test_step_head", StepHeadBert)
    plain = keras_attn.build_transformer_model(CONFIG, application="lm")
    plain.set_weights(model.get_weights())
    ids = sequences(0)
    inputs = bert_inputs(ids)
    np.testing.assert_allclose(to_numpy(model(inputs)), 2 * to_numpy(plain(inputs)), rtol=1e-6)
    cached_logits_equal_the_full_pass(model)


def test_a_hook_written_for_cache_step_is_deprecated_and_still_decodes():
    """An override of the deprecated `cache_step=` spelling warns, naming
    `step=`, when its class is made, and decodes as before: the adapter
    gives it the step's `CacheStep` (without it, the step's doubled logits
    would be missing, or the call would fail)."""
    with pytest.warns(DeprecationWarning, match=r"CacheStepHeadBert.language_model_head "
                                                r"takes `cache_step=`.*`step=FULL_PASS`"):
        class CacheStepHeadBert(keras_attn.Transformer):
            def language_model_head(self, hidden, condition=None, cache_step=None):
                assert cache_step is None or hasattr(cache_step, "key_positions")
                logits = super().language_model_head(hidden, condition, cache_step=cache_step)
                return logits * 2.0

    assert CacheStepHeadBert.hooks_without_step == {}
    model = build_registered("test_cache_step_head", CacheStepHeadBert)
    with pytest.warns(DeprecationWarning, match=r"`cache_step=` is deprecated; pass "
                                                r"step=DecodeStep\(cache_step\)"):
        cached_logits_equal_the_full_pass(model)
