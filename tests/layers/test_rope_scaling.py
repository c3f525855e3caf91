import numpy as np
import pytest

import keras_attn
from keras_attn.layers.rope_scaling import CLIPPED_TYPES
from keras_attn.layers.rope_scaling import ROPE_TYPES
from tests import reference
from tests.harness import run_layer_test, to_numpy

RNG = np.random.default_rng(33)
SIZE, LENGTH = 16, 7

# One scaling of each type, with parameters that make it differ from plain
# RoPE at SIZE features and LENGTH positions (YaRN's ramp and Llama 3.1's
# smoothing both cover some pairs only).
SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 2.0},
    "ntk": {"rope_type": "ntk", "factor": 3.0},
    "ntk_mixed": {"rope_type": "ntk", "factor": 3.0, "exponent": 0.625},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
    "yarn_mscale": {
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048,
        "mscale": 0.707, "mscale_all_dim": 1.0, "beta_fast": 16, "truncate": False,
    },
    "llama3": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 2048,
    },
    # The original length 5 within LENGTH 7: the long factors, a full
    # pass over the first 5 positions the short ones.
    "longrope": {
        "type": "su", "short_factor": [1.0, 1.5, 2.0, 1.0, 3.0, 1.2, 1.0, 4.0],
        "long_factor": [2.0, 1.0, 5.0, 1.5, 1.0, 6.0, 2.5, 8.0],
        "original_max_position_embeddings": 5, "factor": 3.0,
    },
}


def standard(scaling):
    scaling = dict(scaling)
    scaling.setdefault("rope_type", scaling.pop("type", None))
    if scaling["rope_type"] == "su":  # LongRoPE's legacy name
        scaling["rope_type"] = "longrope"
    return scaling


def features(length=LENGTH):
    return RNG.normal(size=(2, length, 2, SIZE)).astype("float32")


@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_rotation_matches_the_formulas(name):
    scaling = SCALINGS[name]
    query, key = features(), features()
    frequencies, attention_factor = reference.rope_scaling_frequencies(
        SIZE, 10000.0, standard(scaling), length=LENGTH
    )
    layer = keras_attn.layers.RotaryEmbedding(scaling=scaling)
    rotated_query, rotated_key = layer(query, key)
    for rotated, x in ((rotated_query, query), (rotated_key, key)):
        np.testing.assert_allclose(
            to_numpy(rotated),
            reference.rope(x, frequencies=frequencies, attention_factor=attention_factor),
            atol=1e-5,
        )


@pytest.mark.parametrize("rope_type", sorted(set(ROPE_TYPES) - set(CLIPPED_TYPES)))
def test_a_factor_of_one_is_plain_rope(rope_type):
    scaling = {**SCALINGS[rope_type], "factor": 1.0}
    if rope_type == "dynamic":
        # Its base grows with T / L even at factor 1 (transformers' formula):
        # plain RoPE holds within the original length.
        scaling["original_max_position_embeddings"] = LENGTH
    if rope_type == "longrope":
        # LongRoPE's factor sets the attention factor; lists of ones keep
        # the frequencies.
        scaling.update(short_factor=[1.0] * (SIZE // 2), long_factor=[1] * (SIZE // 2))
    x = features()
    plain = keras_attn.layers.RotaryEmbedding()(x, x)[0]
    scaled = keras_attn.layers.RotaryEmbedding(scaling=scaling)(x, x)[0]
    np.testing.assert_allclose(to_numpy(scaled), to_numpy(plain), atol=1e-6)


def test_linear_scaling_reads_positions_divided_by_the_factor():
    x = features()
    rotated = keras_attn.layers.RotaryEmbedding(scaling=SCALINGS["linear"])(x, x)[0]
    expected = reference.rope(x, positions=np.arange(LENGTH) / 2.0)
    np.testing.assert_allclose(to_numpy(rotated), expected, atol=1e-5)


@pytest.mark.parametrize("name", ["linear", "ntk", "ntk_mixed", "yarn", "llama3"])
def test_a_cached_step_rotates_as_the_full_pass(name):
    layer = keras_attn.layers.RotaryEmbedding(scaling=SCALINGS[name])
    x = features()
    full = to_numpy(layer(x, x)[0])
    positions = np.array([2, 3], "int32")
    step = to_numpy(layer.rotate(x[:, 2:4], positions))
    np.testing.assert_allclose(step, full[:, 2:4], atol=1e-6)


def test_rotated_values_do_not_get_the_attention_factor():
    """YaRN's attention factor is a temperature of the scores: queries and
    keys get it, values rotated by `rotary_value` do not."""
    layer = keras_attn.layers.RotaryEmbedding(scaling=SCALINGS["yarn"])
    frequencies, attention_factor = reference.rope_scaling_frequencies(
        SIZE, 10000.0, SCALINGS["yarn"]
    )
    assert attention_factor > 1.1
    x = features()
    values = to_numpy(layer.rotate(x, np.arange(LENGTH, dtype="int32"), values=True))
    np.testing.assert_allclose(values, reference.rope(x, frequencies=frequencies), atol=1e-5)


def test_dynamic_scaling_at_a_cached_step_uses_the_length_so_far():
    """A step at position n encodes n + 1 positions: its rotation is that of
    the full pass over the first n + 1 tokens, not over the whole
    sequence (the keys a cache holds keep their step's frequencies)."""
    layer = keras_attn.layers.RotaryEmbedding(scaling=SCALINGS["dynamic"])
    x = features()
    step = to_numpy(layer.rotate(x[:, 5:6], np.array([5], "int32")))
    prefix = to_numpy(layer(x[:, :6], x[:, :6])[0])
    np.testing.assert_allclose(step, prefix[:, 5:6], atol=1e-6)
    whole = to_numpy(layer(x, x)[0])
    assert np.abs(step - whole[:, 5:6]).max() > 1e-3
    # Within the original length every step is plain RoPE, as the full pass.
    early = to_numpy(layer.rotate(x[:, 2:3], np.array([2], "int32")))
    np.testing.assert_allclose(early, to_numpy(keras_attn.layers.RotaryEmbedding()(x, x)[0])[:, 2:3],
                               atol=1e-6)


@pytest.mark.parametrize("name", ["yarn", "dynamic"])
def test_scaled_rotary_embedding_through_the_harness(name, tmp_path):
    scaling = SCALINGS[name]
    query, key = features(), features(5)

    def numpy_reference(layer, inputs):
        frequencies, attention_factor = reference.rope_scaling_frequencies(
            SIZE, 500.0, standard(scaling), length=LENGTH
        )
        return tuple(
            reference.rope(inputs[name], frequencies=frequencies, attention_factor=attention_factor)
            for name in ("query", "key")
        )

    run_layer_test(
        keras_attn.layers.RotaryEmbedding,
        {"max_wavelength": 500, "scaling": scaling},
        inputs={"query": query, "key": key},
        expected_output_shape=[query.shape, key.shape],
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize(
    "scaling, message",
    [
        ({"rope_type": "longer", "factor": 2.0},
         "Unknown `rope_type` 'longer'.*'dynamic', 'leaky_rerope', 'linear', 'llama3', "
         "'longrope', 'ntk', 'rerope', 'yarn'"),
        ({**SCALINGS["longrope"], "long_factor": [1.0] * 7},
         r"`short_factor` and `long_factor` must have one number per rotated pair each; "
         r"received 8 and 7"),
        ({**SCALINGS["longrope"], "short_factor": [1.0] * 4, "long_factor": [1.0] * 4},
         r"d / 2 = 8 each; received short_factor=\[1.0, 1.0, 1.0, 1.0\]"),
        ({**SCALINGS["longrope"], "short_factor": [1.0, 0.0] * 4},
         r"`short_factor` must be a list of positive numbers.*received \[1.0, 0.0"),
        ({**SCALINGS["longrope"], "long_factor": 2.0},
         r"`long_factor` must be a list of positive numbers.*received 2.0"),
        ({key: value for key, value in SCALINGS["longrope"].items()
          if key != "original_max_position_embeddings"},
         r"rope_type 'longrope' needs .*missing \['original_max_position_embeddings'\]"),
        ({"rope_type": "linear", "factor": 0.0}, "`factor` must be a positive number; received 0.0"),
        ({"rope_type": "linear", "factor": "2"}, "`factor` must be a positive number; received '2'"),
        ({"rope_type": "yarn", "factor": 2.0}, r"missing \['original_max_position_embeddings'\]"),
        ({"rope_type": "ntk", "factor": 2.0, "beta_fast": 8},
         r"unknown parameters \['beta_fast'\] \(beta_fast=8\)"),
        ({"rope_type": "linear", "type": "yarn", "factor": 2.0}, "give one"),
        ({"factor": 2.0}, "Unknown `rope_type` None"),
        ({**SCALINGS["yarn"], "truncate": 1}, "`truncate` must be true or false"),
        ({**SCALINGS["llama3"], "high_freq_factor": 1.0}, "must exceed `low_freq_factor`"),
    ],
)
def test_bad_scalings_are_clear_errors(scaling, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.layers.RotaryEmbedding(scaling=scaling)(features(), features())


def test_longrope_switches_every_position_past_the_original_length():
    """A pass of at most `L` positions rotates with the short factors, a
    longer one every position (the first included) with the long ones;
    a cached step reads its own length, as `dynamic` does."""
    layer = keras_attn.layers.RotaryEmbedding(scaling=SCALINGS["longrope"])
    x = features()
    short = to_numpy(layer(x[:, :5], x[:, :5])[0])
    whole = to_numpy(layer(x, x)[0])
    assert np.abs(short - whole[:, :5]).max() > 1e-3
    step = to_numpy(layer.rotate(x[:, 4:5], np.array([4], "int32")))
    np.testing.assert_allclose(step, short[:, 4:5], atol=1e-6)
    step = to_numpy(layer.rotate(x[:, 5:6], np.array([5], "int32")))
    np.testing.assert_allclose(step, whole[:, 5:6], atol=1e-6)


def test_longrope_is_recomputed_past_its_original_length():
    from keras_attn.layers.rope_scaling import recompute_length
    from keras_attn.layers.rope_scaling import standard_rope_scaling

    assert recompute_length(standard_rope_scaling(SCALINGS["longrope"])) == 5
    assert recompute_length(standard_rope_scaling(SCALINGS["dynamic"])) is None
    assert recompute_length(None) is None


def test_rotary_scaling_needs_rotary_positions():
    with pytest.raises(ValueError, match="needs position_encoding in"):
        keras_attn.layers.MultiHeadAttention(
            heads=2, head_size=8, rotary_scaling=SCALINGS["linear"]
        )


def test_ntk_with_exponent_one_is_ntk_and_mixed_keeps_the_ends():
    """NTK-mixed's straight line in log scale (exponent 1) is NTK's new
    base exactly; another exponent moves the pairs in between, not the
    first (kept) nor the last (divided by the factor)."""
    ntk = reference.rope_scaling_frequencies(SIZE, 10000.0, SCALINGS["ntk"])[0]
    line, _ = reference.rope_scaling_frequencies(SIZE, 10000.0, {**SCALINGS["ntk"], "exponent": 1.0 + 1e-12})
    np.testing.assert_allclose(line, ntk, rtol=1e-9)
    mixed, _ = reference.rope_scaling_frequencies(SIZE, 10000.0, SCALINGS["ntk_mixed"])
    np.testing.assert_allclose(mixed[[0, -1]], ntk[[0, -1]], rtol=1e-9)
    assert np.abs(mixed[1:-1] / ntk[1:-1] - 1).min() > 1e-3


@pytest.mark.parametrize("length", [5, 6])
def test_longrope_frequencies_match_transformers_on_both_sides(length):
    """transformers' Phi-3 (`longrope`, `factor` from
    `max_position_embeddings / original_max_position_embeddings`)."""
    transformers = pytest.importorskip("transformers")
    from keras_attn.layers.rope_scaling import scaled_frequencies
    from keras_attn.layers.rope_scaling import standard_rope_scaling

    if not hasattr(transformers, "Phi3Config"):
        pytest.skip("this transformers has no Phi3Config")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    scaling = standard(SCALINGS["longrope"])
    config = transformers.Phi3Config(
        hidden_size=2 * SIZE, num_attention_heads=2, max_position_embeddings=15,
        original_max_position_embeddings=5,
        rope_parameters={**{k: v for k, v in scaling.items() if k != "factor"},
                         "rope_type": "longrope", "rope_theta": 500.0},
    )
    expected, expected_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=length)
    frequencies, attention_factor = scaled_frequencies(
        SIZE, 500.0, standard_rope_scaling(scaling), length=length
    )
    np.testing.assert_allclose(to_numpy(frequencies), expected.numpy(), rtol=1e-6)
    assert attention_factor == pytest.approx(expected_factor, rel=1e-6)


@pytest.mark.parametrize("name", ["linear", "dynamic", "yarn", "yarn_mscale", "llama3"])
def test_frequencies_match_transformers(name):
    transformers = pytest.importorskip("transformers")
    from keras_attn.layers.rope_scaling import scaled_frequencies
    from keras_attn.layers.rope_scaling import standard_rope_scaling

    try:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    except ImportError:
        pytest.skip("this transformers has no modeling_rope_utils.ROPE_INIT_FUNCTIONS")
    scaling = standard(SCALINGS[name])
    # transformers' dynamic scaling reads the original length from
    # `max_position_embeddings`.
    max_position = scaling.get("original_max_position_embeddings", 64)
    try:
        config = transformers.LlamaConfig(
            hidden_size=2 * SIZE, num_attention_heads=2, head_dim=SIZE,
            max_position_embeddings=max_position,
            rope_parameters={**scaling, "rope_theta": 500.0},
        )
        expected, expected_factor = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](
            config, "cpu", seq_len=11
        )
    except TypeError as error:  # transformers 4 calls it `rope_scaling`
        pytest.skip(f"transformers {transformers.__version__}'s rope API differs: {error}")
    frequencies, attention_factor = scaled_frequencies(
        SIZE, 500.0, standard_rope_scaling(scaling), length=11
    )
    np.testing.assert_allclose(to_numpy(frequencies), expected.numpy(), rtol=1e-5)
    assert attention_factor == pytest.approx(expected_factor, rel=1e-6)


@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_a_length_per_row_gives_each_row_its_own_tables(name):
    """Rows of a batch at their own positions and lengths (the serving
    engine's): each row's tables equal that row's alone, at its length, on
    both sides of the original length."""
    embedding = keras_attn.layers.RotaryEmbedding(scaling=standard(SCALINGS[name]))
    positions = np.array([[1, 2, 3], [4, 5, 6], [0, 8, 9]], "int32")
    lengths = np.array([4, 7, 10], "int32")
    cos, sin = (to_numpy(t) for t in embedding.tables(positions, SIZE, lengths))
    for row in range(3):
        alone = embedding.tables(positions[row], SIZE, int(lengths[row]))
        np.testing.assert_allclose(cos[row], to_numpy(alone[0])[0], atol=1e-6)
        np.testing.assert_allclose(sin[row], to_numpy(alone[1])[0], atol=1e-6)
    # The rows' own lengths matter: one length for every row differs.
    shared = to_numpy(embedding.tables(positions, SIZE, 10)[0])
    assert np.abs(shared[0] - cos[0]).max() > 1e-3
