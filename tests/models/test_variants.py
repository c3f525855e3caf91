"""The model harness: every registered variant, every application it
declares (`applications`), through the same checks.

The cases are read from the registry at collection time, so a variant
registered later (a new built-in module) is covered without touching this
file. For each (variant, application): build, config round trip, `.keras`
save and load with equal outputs, one fit step with a finite loss and
changed weights for the first application of each output kind
(`fit_applications`: jit-compiled on TensorFlow and JAX for the first,
eagerly for the others; eager on torch); per
variant, `mixed_float16` / `mixed_bfloat16` forward passes without NaN and
close to float32.

The common properties (issue 34; transformers' `ModelTesterMixin`,
keras-hub's `run_backbone_test`), on one untrained model per case shared by
their tests (`shared_model`):
- a padded batch equals each row alone, at the real tokens (1e-5);
- left padding: a left-padded row equals the row alone where the variant
  has no absolute position table (no `Embedding-Position` layer) or counts
  its positions over real tokens (RoBERTa); elsewhere left padding shifts
  the positions, and the test asserts that it changes the outputs (the
  reason such variants take right padding only);
- determinism: two calls on the same inputs are bitwise equal;
- `.keras` save and load, and mixed precision: `test_variant` above;
- generation (cached decoding equal to the full pass, and continuing from
  a prompt plus generated tokens equal to one call) for every generative
  variant: tests/generation/test_one_forward_pass.py, registry-driven too,
  whose compiled decoding loop it shares.
"""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.models import VARIANTS
from keras_attn.models.transformer import APPLICATIONS
from tests.harness import supports_jit
from tests.harness import to_numpy

# Tiny: hidden 16, one layer, vocabulary 30, length 8.
CONFIG = dict(
    vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=16, type_vocab_size=2,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, mask_token_id=3,
)
# Fields a variant refuses to build without (documented by its class).
VARIANT_FIELDS = {
    "roberta+": dict(attention_key_size=12, embedding_size=12),
    "albert": dict(embedding_size=12, num_hidden_layers=2),
    "albert_unshared": dict(embedding_size=12),
    "electra": dict(embedding_size=12),
    "t5.1.1": dict(tie_word_embeddings=False, feed_forward_gated=True),
    "mt5.1.1": dict(tie_word_embeddings=False, attention_head_size=6),
    # Grouped-query attention: one key/value head for the two query heads.
    "llama": dict(num_key_value_heads=1),
    "qwen3": dict(num_key_value_heads=1, attention_head_size=6),
    "gemma": dict(num_key_value_heads=1, attention_head_size=6),
    # A window of 3 under the 8 tokens (the banded path), capped scores and
    # logits, scores scaled by 5 ** -0.5.
    "gemma2": dict(
        num_key_value_heads=1, attention_head_size=6, attention_window=3,
        query_pre_attention_scalar=5,
        attention_logit_soft_cap=2.0, final_logit_soft_cap=3.0,
    ),
    "gemma3": dict(
        num_key_value_heads=1, attention_head_size=6, attention_window=3,
        query_pre_attention_scalar=5, final_logit_soft_cap=3.0,
    ),
    # LongRoPE switched at 5 (the 8 tokens take the long factors), a window.
    "phi3": dict(
        num_key_value_heads=1, attention_head_size=6, attention_window=6, rope_scaling=dict(
            rope_type="longrope", short_factor=[1.0, 1.5, 2.0], long_factor=[2.0, 3.0, 5.0],
            original_max_position_embeddings=5, factor=4.0,
        ),
    ),
    # Both position terms, log buckets under the 8 tokens, projections of
    # their own, a normalised table, heads of 6 in a hidden size of 16.
    "deberta_v2": dict(
        position_attention_types=["c2p", "p2c"], position_buckets=4, max_relative_distance=6,
        share_attention_key=False, relative_embedding_norm=True, attention_head_size=6,
    ),
}

# The registry as collected: tests that register a variant of their own
# (removed again by conftest's fixture) do not add cases.
REGISTERED = dict(VARIANTS)
CASES = [
    (variant, application)
    for variant, variant_class in REGISTERED.items()
    for application in variant_class.applications
]
UNSUPPORTED = [
    (variant, application)
    for variant, variant_class in REGISTERED.items()
    for application in APPLICATIONS
    if application not in variant_class.applications
]


def build(variant, application, **overrides):
    config = dict(CONFIG, **VARIANT_FIELDS.get(variant, {}), **overrides)
    return keras_attn.build_transformer_model(config, variant=variant, application=application)


def inputs_for(model):
    rng = np.random.default_rng(0)
    token_ids = rng.integers(4, 30, size=(2, 8)).astype("int32")
    token_ids[1, 6:] = 0  # padding
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 4:] = 1
    segment_ids[token_ids == 0] = 0
    if "encoder_token_ids" in model.input_contract.names:
        # An encoder-decoder: a padded source, and a target of its own length.
        return {"encoder_token_ids": token_ids, "decoder_token_ids": token_ids[::-1, :5]}
    inputs = {"token_ids": token_ids}
    if "segment_ids" in model.input_contract.names:
        inputs["segment_ids"] = segment_ids
    return inputs


def outputs_of(model, inputs):
    return to_numpy(model(inputs))


def test_every_registered_variant_is_covered():
    # A variant declaring no application would silently escape the harness.
    assert {variant for variant, _ in CASES} == set(REGISTERED)


@pytest.mark.parametrize("variant, application", UNSUPPORTED)
def test_unsupported_application_is_an_error(variant, application):
    with pytest.raises(ValueError, match=f"received {application!r}"):
        build(variant, application)


@pytest.mark.parametrize("variant, application", CASES)
def test_variant(variant, application, tmp_path):
    """One model per case goes through every check; training comes last,
    since it changes the weights the other checks compare."""
    model = build(variant, application)
    inputs = inputs_for(model)
    expected = outputs_of(model, inputs)

    restored = type(model).from_config(model.get_config())
    assert restored.get_config() == model.get_config()
    restored.set_weights(model.get_weights())
    np.testing.assert_allclose(outputs_of(restored, inputs), expected, atol=1e-6)

    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, keras_attn.TransformerModel)
    np.testing.assert_allclose(outputs_of(loaded, inputs), expected, atol=1e-6)

    # Precision does not depend on the mask: once per variant keeps it fast.
    if application == VARIANTS[variant].applications[0]:
        for policy in ("mixed_float16", "mixed_bfloat16"):
            check_mixed_precision(model, variant, application, policy, inputs, expected)

    if application in fit_applications(variant):
        # Compiled (XLA on TensorFlow and JAX) for the variant's first
        # application, eagerly for its other output kinds: compiling the
        # step is what costs (about 1.7 s a case on JAX and TensorFlow,
        # 0.15 s eagerly), and what it checks, that the variant's backward
        # pass compiles, does not depend on the head.
        compiled = application == REGISTERED[variant].applications[0]
        check_fit_step(model, application, inputs, compiled=compiled)


def fit_applications(variant):
    """The applications of `variant` whose fit step the harness runs: the
    first of each output kind (the encoder's hidden states, ELECTRA's
    per-token logit, a language-model head). `"mlm"`, `"lm"` and `"unilm"`
    differ only in their attention mask, which the other checks cover; the
    loss and the head's gradients are the same (a jit-compiled fit step
    costs about 1.5 s a case on JAX and TensorFlow)."""
    first = {}
    for application in REGISTERED[variant].applications:
        kind = application if application in ("encoder", "discriminator") else "language model"
        first.setdefault(kind, application)
    return set(first.values())


def check_mixed_precision(model, variant, application, policy, inputs, expected):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        half = build(variant, application)
    finally:
        keras.config.set_dtype_policy(previous)
    half.set_weights(model.get_weights())
    output = to_numpy(keras.ops.cast(half(inputs), "float32"))
    assert np.all(np.isfinite(output)), policy
    # Same weights, half the precision: close to the float32 result.
    np.testing.assert_allclose(output, expected, atol=0.1, rtol=0.05, err_msg=policy)


def check_fit_step(model, application, inputs, compiled=True):
    if application == "encoder":
        loss = "mse"
        targets = np.random.default_rng(1).normal(size=(2, 8, 16)).astype("float32")
    elif application == "discriminator":
        # One logit per token: was it replaced?
        loss = keras.losses.BinaryCrossentropy(from_logits=True)
        targets = np.random.default_rng(1).integers(0, 2, size=(2, 8)).astype("float32")
    else:
        loss = keras_attn.TokenCrossEntropy(ignore_id=0)
        targets = inputs.get("token_ids", inputs.get("decoder_token_ids"))
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=loss,
        jit_compile=compiled and supports_jit(), run_eagerly=not compiled,
    )
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    history = model.fit(inputs, targets, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [to_numpy(w) for w in model.trainable_weights]
    assert all(np.all(np.isfinite(w)) for w in after)
    assert any(not np.array_equal(b, a) for b, a in zip(before, after))


def test_a_variant_written_by_a_user_builds_and_trains():
    """The `keras_attn.Transformer` docstring's example: ALiBi + rotary in one
    short class, registered and built by name."""

    @keras_attn.register_variant("test_alibi_rotary")
    class AlibiRotary(keras_attn.Transformer):
        position_encoding = "rotary"

        def make_position_embedding(self):
            return None

        def make_position_bias(self):
            return keras_attn.layers.ALiBiBias(
                self.config.num_heads, causal=self.causal, name="Position-Bias"
            )

    # Large weights, so that each encoding's effect is far above rounding.
    model = build("test_alibi_rotary", "lm", initializer_range=0.5)
    assert "Embedding-Position" not in {layer.name for layer in model.layers}
    inputs = inputs_for(model)
    # Both encodings are in the computation: the same weights without the
    # rotation (alibi) or without the bias (roformer) give other outputs.
    for other in ("alibi", "roformer"):
        reference = build(other, "lm", initializer_range=0.5)
        reference.set_weights(model.get_weights())
        assert np.abs(outputs_of(reference, inputs) - outputs_of(model, inputs)).max() > 1e-4, other
    check_fit_step(model, "lm", inputs)
    # A name is bound to one class.
    with pytest.raises(ValueError, match="already registered"):
        keras_attn.register_variant("alibi", AlibiRotary)
    with pytest.raises(TypeError, match="subclass of keras_attn.Transformer"):
        keras_attn.register_variant("test_not_a_variant", dict)


# Common properties ------------------------------------------------------------

# Larger weights than CONFIG's default: a wrong position or a leaked pad
# moves the outputs far above the 1e-5 the checks allow.
PROPERTY_OVERRIDES = dict(initializer_range=0.2)
_SHARED_MODELS = {}
# Real lengths of the two rows of `property_inputs`: the second is padded.
LENGTHS = (8, 6)


def shared_model(variant, application):
    """One untrained model per case, built on first use; the property tests
    below only call it."""
    key = (variant, application)
    if key not in _SHARED_MODELS:
        keras.utils.set_random_seed(0)
        _SHARED_MODELS[key] = build(variant, application, **PROPERTY_OVERRIDES)
    return _SHARED_MODELS[key]


def property_inputs(model, left_padding=False):
    """Two rows of `LENGTHS` real tokens, padded with the model's pad id
    after (or, with `left_padding`, before) the real ones; the second
    segment from the fifth real token on; an encoder-decoder's decoder
    tokens unpadded."""
    pad = model.template.config.pad_token_id
    rng = np.random.default_rng(0)
    width = max(LENGTHS)
    token_ids = np.full((2, width), pad, "int32")
    segment_ids = np.zeros((2, width), "int32")
    for row, length in enumerate(LENGTHS):
        real = slice(width - length, width) if left_padding else slice(0, length)
        token_ids[row, real] = rng.integers(4, 30, size=length)
        segment_ids[row, real] = (np.arange(length) >= 4).astype("int32")
    if "encoder_token_ids" in model.input_contract.names:
        decoder = rng.integers(4, 30, size=(2, 5)).astype("int32")
        return {"encoder_token_ids": token_ids, "decoder_token_ids": decoder}
    inputs = {"token_ids": token_ids}
    if "segment_ids" in model.input_contract.names:
        inputs["segment_ids"] = segment_ids
    return inputs


def single_row(inputs, row, length, left_padding=False):
    """Row `row` of `inputs` alone, its padding cut off (the decoder's
    tokens kept whole)."""
    real = slice(-length, None) if left_padding else slice(0, length)
    return {
        name: value[row : row + 1] if name == "decoder_token_ids" else value[row : row + 1, real]
        for name, value in inputs.items()
    }


def real_outputs(model, outputs, row, length, left_padding=False):
    """The outputs of row `row` at its real tokens (an encoder-decoder's
    outputs are the decoder's, all real)."""
    if "decoder_token_ids" in model.input_contract.names:
        return outputs[row]
    return outputs[row, -length:] if left_padding else outputs[row, :length]


def allows_left_padding(model):
    """No absolute position table, or one counting real tokens only
    (RoBERTa's `count_from_padding`): the pads before a row move none of
    its positions."""
    names = {layer.name for layer in model.layers}
    if "Embedding-Position" not in names:
        return True
    return bool(model.get_layer("Embedding-Position").get_config().get("count_from_padding"))


@pytest.mark.parametrize("variant, application", CASES)
def test_padded_batch_equals_each_row_alone(variant, application):
    model = shared_model(variant, application)
    inputs = property_inputs(model)
    batched = outputs_of(model, inputs)
    for row, length in enumerate(LENGTHS):
        alone = outputs_of(model, single_row(inputs, row, length))
        np.testing.assert_allclose(
            real_outputs(model, batched, row, length), real_outputs(model, alone, 0, length),
            atol=1e-5, rtol=1e-5, err_msg=f"{variant} {application}, row {row}",
        )


@pytest.mark.parametrize("variant, application", CASES)
def test_left_padding_equals_the_row_alone_without_absolute_positions(variant, application):
    model = shared_model(variant, application)
    inputs = property_inputs(model, left_padding=True)
    batched = outputs_of(model, inputs)
    row, length = 1, LENGTHS[1]
    expected = real_outputs(model, outputs_of(model, single_row(inputs, row, length, True)), 0, length)
    found = real_outputs(model, batched, row, length, left_padding=True)
    if allows_left_padding(model):
        np.testing.assert_allclose(
            found, expected, atol=1e-5, rtol=1e-5, err_msg=f"{variant} {application}"
        )
    else:
        # Not supported, and detectably so: the pads take the first
        # positions, so the real tokens read other rows of the table.
        assert np.abs(found - expected).max() > 1e-3, f"{variant} {application}"


@pytest.mark.parametrize("variant, application", CASES)
def test_two_calls_are_bitwise_equal(variant, application):
    model = shared_model(variant, application)
    inputs = property_inputs(model)
    np.testing.assert_array_equal(outputs_of(model, inputs), outputs_of(model, inputs))
