"""`rope_scaling` and `rope_theta` from a config to a rotary model: read from
Hugging Face spellings, refused by variants without rotary positions, the
same in cached generation as in the full pass, and kept by `.keras` files."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import CachedForward
from keras_attn.models.config_files import load_config
from tests.generation.test_generate import uncached_greedy
from tests.harness import to_numpy

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=32, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2,
)
YARN = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 16}
PROMPTS = [[2, 7, 9], [2, 11, 5, 31, 8, 17, 4]]


@pytest.fixture(scope="module")
def model():
    # log-n scaling too: it scales the scores by each query's key count,
    # independently of the rotation, so the two compose.
    return keras_attn.build_transformer_model(
        CONFIG, variant="roformer", application="lm", rope_scaling=YARN,
        rope_theta=500, log_n_train_length=8,
    )


def test_the_attention_gets_the_scaling(model):
    attention = model.get_layer("Transformer-0-MultiHeadSelfAttention")
    assert attention.rotary_scaling["rope_type"] == "yarn"
    assert attention.rotary_scaling["beta_fast"] == 32.0
    assert attention.rotary_max_wavelength == 500


def test_generation_past_the_original_length_equals_the_full_pass(model):
    generated = model.generate(PROMPTS, max_new_tokens=12)
    np.testing.assert_array_equal(generated, uncached_greedy(model, PROMPTS, 12))


def test_each_cached_step_equals_the_full_pass(model):
    """Logits, not only their argmax: a cached step rotating without the
    scaling (or without YaRN's attention factor) fails here."""
    assert_each_cached_step_equals_the_full_pass(model)


def assert_each_cached_step_equals_the_full_pass(model, length=20, prompt=6):
    ids = np.random.default_rng(0).integers(3, 40, size=(2, length)).astype("int32")
    full = to_numpy(model({"token_ids": ids, "segment_ids": np.zeros_like(ids)}))
    forward = CachedForward(model)
    logits, cache = forward(ids[:, :prompt], 0, forward.empty_cache(2, forward.capacity(prompt, length)))
    for position in range(prompt, length):
        logits, cache = forward(ids[:, position : position + 1], position, cache)
        np.testing.assert_allclose(
            to_numpy(logits)[:, 0], full[:, position], atol=1e-5, rtol=1e-5,
            err_msg=f"position {position}",
        )


RE = {"rope_type": "rerope", "window": 3}
LEAKY = {"rope_type": "leaky_rerope", "window": 3, "k": 4}


@pytest.fixture(scope="module")
def rerope_model():
    return keras_attn.build_transformer_model(
        CONFIG, variant="roformer", application="lm", rope_scaling=RE, log_n_train_length=8,
    )


def test_rerope_generation_past_the_window_equals_the_full_pass(rerope_model):
    """The cache holds unrotated keys; each step scores them with the
    clipped positions, as the full pass does (issue 33, item 2)."""
    generated = rerope_model.generate(PROMPTS, max_new_tokens=8)
    np.testing.assert_array_equal(generated, uncached_greedy(rerope_model, PROMPTS, 8))


def test_leaky_rerope_with_a_window_cache_equals_the_full_pass():
    """Leaky ReRoPE under a local window: the full pass takes the banded
    path at 20 tokens and decoding a windowed cache."""
    model = keras_attn.build_transformer_model(
        CONFIG, variant="roformer", application="lm", rope_scaling=LEAKY, attention_window=6,
    )
    assert_each_cached_step_equals_the_full_pass(model)


def test_leaky_rerope_unilm_generation_equals_the_full_pass(monkeypatch):
    """UniLM's prompt attends both ways (negative distances past the
    window) in the cached prompt pass too."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")  # the rerope lm compiles
    model = keras_attn.build_transformer_model(
        CONFIG, variant="roformer", application="unilm", rope_scaling=LEAKY,
    )
    generated = model.generate(PROMPTS, max_new_tokens=6)
    np.testing.assert_array_equal(generated, uncached_greedy(model, PROMPTS, 6))


def test_a_keras_file_keeps_the_scaling(model, tmp_path):
    ids = np.array([[2, 7, 9, 11, 5, 31, 8, 17, 4, 3, 6, 12, 13, 14, 15, 16, 18, 19]], "int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids)}
    path = str(tmp_path / "roformer_yarn.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(
        to_numpy(restored(inputs)), to_numpy(model(inputs)), atol=1e-5
    )
    name = "Transformer-1-MultiHeadSelfAttention"
    assert restored.get_layer(name).rotary_scaling == model.get_layer(name).rotary_scaling


HF_BASE = dict(CONFIG, model_type="roformer")


def test_hugging_face_rope_scaling_is_read():
    config = load_config({
        **HF_BASE, "rope_theta": 500000.0,
        "rope_scaling": {"type": "linear", "factor": 4.0},
    })
    assert config.rotary_base == 500000.0
    assert config.rope_scaling == {"rope_type": "linear", "factor": 4.0}


def test_transformers_5_rope_parameters_are_read():
    config = load_config({
        **HF_BASE,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                            "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    })
    assert config.rotary_base == 500000.0
    # Its original length defaults to `max_position_embeddings`, as in transformers.
    assert config.rope_scaling == {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 32,
    }
    plain = load_config({**HF_BASE, "rope_parameters": {"rope_type": "default", "rope_theta": 20.0}})
    assert plain.rope_scaling is None and plain.rotary_base == 20.0


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0},
          "rope_parameters": {"rope_type": "linear", "factor": 3.0}}, "which differ; give one"),
        ({"rope_theta": 10.0, "rope_parameters": {"rope_type": "default", "rope_theta": 20.0}},
         "gives `rotary_base` twice"),
        ({"rope_scaling": {"rope_type": "linear", "factor": -1.0}},
         r"`rope_scaling` must be a rope scaling dict \(rope_type 'linear': `factor` must be "
         r"a positive number; received -1.0"),
        ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}},
         r"`rope_parameters` \(read as `rope_scaling`\).*partial_rotary_factor=0.5"),
    ],
)
def test_bad_rope_fields_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        load_config({**HF_BASE, **fields})


def test_a_variant_without_rotary_positions_refuses_a_scaling():
    with pytest.raises(ValueError, match=r"variant='bert' has no rotary positions.*roformer"):
        keras_attn.build_transformer_model(CONFIG, variant="bert", rope_scaling=YARN)


LLAMA_BASE = dict(CONFIG, model_type="llama", max_position_embeddings=16)


def test_dynamic_original_length_is_transformers_in_a_folder_and_ours_elsewhere():
    """A Hugging Face config's `dynamic` scaling takes max_position_embeddings
    as its original length, as transformers does (issue 54, item 12); a
    config without `model_type` (this library's own) keeps the key's."""
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4}
    with pytest.warns(UserWarning, match=r"`rope_scaling` gives rope_type 'dynamic' with "
                      r"original_max_position_embeddings=4.*max_position_embeddings=16"):
        config = load_config({**LLAMA_BASE, "rope_scaling": scaling})
    assert config.rope_scaling["original_max_position_embeddings"] == 16
    assert load_config({**CONFIG, "rope_scaling": scaling}).rope_scaling == scaling


@pytest.mark.parametrize("scaling", [
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4},
    {"rope_type": "yarn", "factor": 4.0},  # the original length is max_position_embeddings
    {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16},
])
def test_scalings_read_alike_by_every_transformers_version_give_no_warning(scaling, recwarn):
    load_config({**LLAMA_BASE, "rope_parameters": scaling})
    assert not [w for w in recwarn if "rope_type" in str(w.message)]


def test_a_yarn_factor_other_than_the_length_ratio_warns_with_both():
    """transformers 4.5x read `max_position_embeddings /
    original_max_position_embeddings` as YaRN's factor, transformers 5 (and
    this library) `factor` (issue 54, item 14)."""
    with pytest.warns(UserWarning, match=(
        r"`rope_parameters` gives rope_type 'yarn' with factor=2.0, but "
        r"max_position_embeddings / original_max_position_embeddings = 16 / 4 = 4\. This "
        r"library reads factor=2.0, as transformers 5 does; transformers 4.5x read the ratio"
    )):
        config = load_config({**LLAMA_BASE, "rope_parameters": {
            "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4,
        }})
    assert config.rope_scaling["factor"] == 2.0


def test_a_rotary_variant_checks_the_width_of_any_config_when_built():
    """A BERT config (no scaling, a family that non-rotary variants read)
    of head width 28 / 4 = 7, built as RoFormer: refused while building,
    naming the config's fields (it failed at the first call, naming
    `key_size`)."""
    with pytest.raises(ValueError, match=r"variant='roformer' \(rotary positions\): rotary "
                       r"positions rotate query/key features in pairs and need an even "
                       r"query/key width d; received `hidden_size`=28 / "
                       r"`num_attention_heads`=4 = 7"):
        keras_attn.build_transformer_model(
            {**CONFIG, "hidden_size": 28, "num_attention_heads": 4}, variant="roformer"
        )


def test_a_rotary_attention_checks_its_width_when_constructed():
    """The same rule for the layer alone, at construction."""
    with pytest.raises(ValueError, match=r"MultiHeadAttention\(position=Rotary\(.*\)\): "
                       r"rotary positions rotate query/key features in pairs .* received "
                       r"key_size=7\."):
        keras_attn.MultiHeadAttention(heads=2, head_size=8, key_size=7,
                                      position_encoding="rotary")
    with pytest.raises(ValueError, match=r"received key_size=None, so head_size=7\."):
        keras_attn.MultiHeadAttention(heads=2, head_size=7, position_encoding="xpos")
    with pytest.raises(ValueError, match=r"rope_type 'dynamic' .* needs a rotary width d > 2; "
                       r"received key_size=2\."):
        keras_attn.MultiHeadAttention(
            heads=2, head_size=8, key_size=2, position_encoding="rotary",
            rotary_scaling={"rope_type": "dynamic", "factor": 2.0,
                            "original_max_position_embeddings": 4},
        )
    # Values are not rotated: an odd value width is fine.
    keras_attn.MultiHeadAttention(heads=2, head_size=7, key_size=8, position_encoding="rotary")


def test_a_scaling_checks_the_rotary_width_of_any_config():
    """A config with a rope scaling is a rotary model's, family or not: an
    odd query/key width is refused when read, naming its fields."""
    with pytest.raises(ValueError, match=r"need an even query/key width d; received "
                       r"`attention_key_size`=9"):
        load_config({**CONFIG, "attention_key_size": 9,
                     "rope_scaling": {"rope_type": "linear", "factor": 2.0}})
