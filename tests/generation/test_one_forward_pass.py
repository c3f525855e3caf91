"""Decoding runs the model's own forward pass: `generate()` of every built-in
variant equals greedy decoding by the full pass (`uncached_greedy`), and for
`"lm"` continuing from a prompt plus generated tokens equals one call; a model
changed by LoRA or quantization decodes as it is now; variants that decoding
cannot follow are refused; saved models keep decoding."""

import os

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn import lora
from keras_attn.generation.cached_forward import GENERATIVE_APPLICATIONS
from keras_attn.torch_runtime.compiled_step import torch_compiles_steps
from keras_attn.models import VARIANTS
from tests.torch_runtime.test_compiled_step import dynamo_counts
from tests.generation.test_generate import uncached_greedy
from tests.harness import to_numpy

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=32, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2, type_vocab_size=2,
)
# RoBERTa with pad id 1 and one token type: its positions start at row 2.
OPTIONS = {
    "roberta": {"type_vocab_size": 1, "pad_token_id": 1},
    "roberta+": {"attention_key_size": 12},
    "albert": {"embedding_size": 8},
    "t5.1.1": {"tie_word_embeddings": False},
    "mt5.1.1": {"tie_word_embeddings": False},
    # Past a window of 2 in the first layer, the second global; capped
    # scores and logits; Gemma 3's global layer scaled, its local base own.
    "gemma2": {
        "attention_window": 2, "layer_types": ["sliding_attention", "full_attention"],
        "attention_logit_soft_cap": 1.0, "final_logit_soft_cap": 2.0,
    },
    "gemma3": {
        "attention_window": 2, "layer_types": ["sliding_attention", "full_attention"],
        "sliding_rotary_base": 100.0, "final_logit_soft_cap": 2.0,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0},
    },
}
STEPS = 4
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")


def cases():
    for name, variant_class in VARIANTS.items():
        generative = [a for a in variant_class.applications if a in GENERATIVE_APPLICATIONS]
        if generative:
            yield name, generative[0]
    yield "roberta", "unilm"


@pytest.mark.parametrize("variant, application", list(cases()))
def test_generate_equals_greedy_decoding_by_the_full_pass(variant, application):
    """Prompts of several lengths in one batch, then a dict prompt with a
    padding mask (one unpadded row, one padded); both calls share one
    compiled loop. On torch that loop's step is one graph, compiled once
    (a step that recompiles per call, e.g. on a Keras name counter, shows
    up here as more graphs)."""
    model = keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, **OPTIONS.get(variant, {})
    )
    before = dynamo_counts()
    prompts = [[2, 7, 9, 11, 13], [3, 5, 8]]
    generated = model.generate(prompts, STEPS)
    np.testing.assert_array_equal(
        generated, uncached_greedy(model, prompts, STEPS),
        err_msg=f"{variant} {application}, prompts of two lengths",
    )
    # As wide as the longest prompt above: the same shapes for the full
    # passes of `uncached_greedy` (JAX compiles its eager ops once).
    token_ids = np.array([[2, 7, 9, 11, 6], [4, 12, 17, 0, 0]], "int32")
    padding_mask = np.array([[1] * 5, [1, 1, 1, 0, 0]], "int32")
    unpadded = [list(token_ids[0]), list(token_ids[1, :3])]
    np.testing.assert_array_equal(
        model.generate({"token_ids": token_ids, "padding_mask": padding_mask}, STEPS),
        uncached_greedy(model, unpadded, STEPS),
        err_msg=f"{variant} {application}, a padded dict prompt",
    )
    if application == "lm":
        check_generation_continues_as_one_call(model, variant, prompts, generated)
    if torch_compiles_steps():
        graphs, breaks, _ = np.subtract(dynamo_counts(), before)
        assert (graphs, breaks) == (1, 0), f"{variant}: {graphs} graphs, {breaks} breaks"


def check_generation_continues_as_one_call(model, variant, prompts, whole):
    """Issue 34's model harness: generating STEPS tokens (`whole`) equals
    generating half of them, then continuing from the prompt plus those (a prefill
    of the longer prompt against step-by-step decoding through the cache;
    transformers' "continue from past key values"). The prompts stay in the
    bucket of the calls above: the same compiled loop. For `"lm"` only: a
    `"unilm"` or `"seq2seq"` prompt is the source, which generated tokens
    do not extend. `whole`: `model.generate(prompts, STEPS)`."""
    half = STEPS // 2
    continued = model.generate(
        [prompt + [int(t) for t in tokens[:half]] for prompt, tokens in zip(prompts, whole)],
        STEPS,
    )
    np.testing.assert_array_equal(
        continued[:, : STEPS - half], whole[:, half:], err_msg=f"{variant}, continued"
    )


def test_the_cases_cover_every_generative_variant():
    covered = {variant for variant, _ in cases()}
    assert covered == {
        name for name, cls in VARIANTS.items()
        if set(cls.applications) & set(GENERATIVE_APPLICATIONS)
    }


def test_generate_decodes_the_model_as_it_is_after_lora_merge_and_quantize():
    """The compiled loop of the first call must not outlive the model it
    was compiled for: LoRA adapters with values, merged adapters and int8
    kernels each decode as the model's own full pass does."""
    model = keras_attn.build_transformer_model(CONFIG, application="lm")
    prompts = [[2, 7, 9, 11, 13], [3, 5, 8]]
    # The first compiled loop; that it decodes the full pass is
    # test_generate_equals_greedy_decoding_by_the_full_pass[bert-lm] (the
    # same model, prompts and steps).
    base = model.generate(prompts, STEPS)

    lora.enable_lora(model, rank=2, feed_forward=True)
    rng = np.random.default_rng(0)
    for variable in model.variables:
        if "lora_kernel" in variable.path:
            variable.assign(rng.normal(scale=1.0, size=variable.shape).astype("float32"))
    adapted = uncached_greedy(model, prompts, STEPS)
    assert (adapted != base).any(), "the adapters must change the greedy tokens"
    np.testing.assert_array_equal(model.generate(prompts, STEPS), adapted, err_msg="LoRA")

    lora.merge_lora(model)
    np.testing.assert_array_equal(
        model.generate(prompts, STEPS), uncached_greedy(model, prompts, STEPS),
        err_msg="merged",
    )

    model.quantize("int8")
    before = dynamo_counts()
    np.testing.assert_array_equal(
        model.generate(prompts, STEPS), uncached_greedy(model, prompts, STEPS),
        err_msg="int8",
    )
    if torch_compiles_steps():
        # Keras' int8 product is a custom autograd function, which dynamo
        # cannot trace: the step must not break into a graph per layer.
        graphs, breaks, _ = np.subtract(dynamo_counts(), before)
        assert (graphs, breaks) == (1, 0), f"int8: {graphs} graphs, {breaks} breaks"


@pytest.fixture
def registered():
    """Registers variants for one test."""
    names = []

    def register(name, variant_class):
        names.append(name)
        return keras_attn.register_variant(name, variant_class)

    yield register
    for name in names:
        VARIANTS.pop(name, None)


def test_a_variant_overriding_a_full_pass_only_hook_cannot_generate(registered):
    """Decoding runs `embed`, the blocks and the head; a variant that
    changes the full pass elsewhere is refused by name, never decoded
    differently."""

    class ScaledBlocks(keras_attn.Transformer):
        def apply_main_layer(self, hidden, index, attention_mask, distance_bias=None):
            hidden = super().apply_main_layer(hidden, index, attention_mask, distance_bias)
            return hidden * 0.5

    registered("test_scaled_blocks", ScaledBlocks)
    model = keras_attn.build_transformer_model(
        CONFIG, variant="test_scaled_blocks", application="lm"
    )
    with pytest.raises(ValueError, match="ScaledBlocks overrides apply_main_layer"):
        model.generate([[2, 7, 9]], STEPS)


def test_a_saved_model_decodes_after_loading(tmp_path):
    """The `.keras` file records the variant: the loaded model rebuilds its
    template over the loaded layers and generates what the original does."""
    model = keras_attn.build_transformer_model(
        CONFIG, variant="roberta", application="lm", **OPTIONS["roberta"]
    )
    path = str(tmp_path / "roberta.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.template is not model.template
    prompts = [[2, 7, 9, 11, 13], [3, 5, 8]]
    np.testing.assert_array_equal(loaded.generate(prompts, STEPS), model.generate(prompts, STEPS))


@pytest.mark.parametrize("variant", ["bert", "albert"])
def test_files_saved_before_the_template_record_load_with_the_same_outputs(variant):
    """Files written by the code before this change (commit c9ee651, see
    tests/fixtures/make_fixtures.py) load and compute what they computed; they
    do not record their variant, so generating says how to rebuild them."""
    loaded = keras.saving.load_model(os.path.join(FIXTURES, f"{variant}_lm_c9ee651.keras"))
    saved = dict(np.load(os.path.join(FIXTURES, f"{variant}_lm_c9ee651_outputs.npz")))
    outputs = loaded({"token_ids": saved.pop("token_ids"), "segment_ids": saved.pop("segment_ids")})
    assert sorted(outputs) == sorted(saved)
    for name, expected in saved.items():
        np.testing.assert_allclose(to_numpy(outputs[name]), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="load its weights with load_weights"):
        loaded.generate([[2, 7, 9]], STEPS)
