"""Hierarchical positions (`hierarchical_position=`): a table of `n` rows
numbers `n * n` positions, checked against bert4keras's formula written here
in numpy."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import CachedForward
from tests.generation.test_generate import uncached_greedy
from tests.harness import run_layer_test, to_numpy

N = 8  # rows of the position table: the models read up to N * N = 64 tokens
CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=N, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2, type_vocab_size=2,
)
RNG = np.random.default_rng(11)


def hierarchical_table(table, alpha, length):
    """bert4keras's hierarchical rows, from the formula: `u = (p - alpha
    p_0) / (1 - alpha)`, position `i n + j` gets `alpha u_i + (1 - alpha) u_j`
    (for every position, those below `n` included)."""
    table = table.astype(np.float64)
    n = len(table)
    spread = (table - alpha * table[0]) / (1 - alpha)
    positions = np.arange(length)
    return alpha * spread[positions // n] + (1 - alpha) * spread[positions % n]


def inputs_of(ids):
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids)}


@pytest.fixture(scope="module")
def bert_pair():
    """A plain BERT and the same weights with hierarchical positions."""
    plain = keras_attn.build_transformer_model(CONFIG)
    hierarchical = keras_attn.build_transformer_model(CONFIG, hierarchical_position=True)
    hierarchical.set_weights(plain.get_weights())
    return plain, hierarchical


def test_layer_harness_and_the_formula(tmp_path):
    """The layer through the shared harness (config, `.keras`, mixed
    precision, a compiled step) at 13 positions from a 5-row table."""

    def numpy_reference(layer, inputs):
        return hierarchical_table(to_numpy(layer.embeddings), 0.3, 13)[None]

    run_layer_test(
        keras_attn.layers.PositionEmbedding,
        {"max_position": 5, "dim": 4, "hierarchical": 0.3},
        inputs={"inputs": RNG.normal(size=(1, 13, 3)).astype("float32")},
        expected_output_shape=(1, 13, 4),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("hierarchical, alpha", [(True, 0.4), (0.25, 0.25)])
def test_every_row_is_the_formula_and_the_first_n_are_the_table(hierarchical, alpha):
    layer = keras_attn.layers.PositionEmbedding(N, 6, hierarchical=hierarchical)
    assert layer.max_length == N * N and layer.alpha == alpha
    output = to_numpy(layer(np.zeros((1, N * N, 1), "float32")))[0]
    table = to_numpy(layer.embeddings)
    np.testing.assert_allclose(output, hierarchical_table(table, alpha, N * N), atol=1e-5)
    np.testing.assert_array_equal(output[:N], table)  # looked up, not recomputed


def test_the_n_boundary_follows_the_formula():
    """Inside every block of `n` positions the steps are the table's own
    (`(1 - alpha)(u_{j+1} - u_j) = p_{j+1} - p_j`); across the boundary,
    position `n` is `alpha u_1 + (1 - alpha) p_0`, one step of the coarse
    level from position 0."""
    alpha = 0.4
    layer = keras_attn.layers.PositionEmbedding(N, 6, hierarchical=True)
    output = to_numpy(layer(np.zeros((1, 3 * N, 1), "float32")))[0].astype(np.float64)
    table = to_numpy(layer.embeddings).astype(np.float64)
    spread_1 = (table[1] - alpha * table[0]) / (1 - alpha)
    np.testing.assert_allclose(output[N - 1], table[N - 1], atol=0)
    np.testing.assert_allclose(output[N], alpha * spread_1 + (1 - alpha) * table[0], atol=1e-5)
    np.testing.assert_allclose(output[N] - output[0], alpha * (spread_1 - table[0]), atol=1e-5)
    for block in (1, 2):
        steps = np.diff(output[block * N : (block + 1) * N], axis=0)
        np.testing.assert_allclose(steps, np.diff(table, axis=0), atol=1e-5)
        # The same position in the next block: one coarse step, alike for every j.
        np.testing.assert_allclose(
            output[(block + 1) * N - 1] - output[block * N - 1],
            output[block * N] - output[(block - 1) * N],
            atol=1e-5,
        )


def test_roberta_offset_table_with_padding():
    """RoBERTa's offset table: the `n` rows from `offset` make the levels,
    padding keeps row `offset - 1`, real tokens are counted over real
    tokens only."""
    layer = keras_attn.layers.PositionEmbedding(
        6, 3, offset=2, count_from_padding=True, hierarchical=0.5
    )
    assert layer.max_length == 16
    padding = np.ones((1, 15), bool)
    padding[0, :3] = False  # left padding
    output = to_numpy(layer(np.zeros((1, 15, 1), "float32"), padding_mask=padding))[0]
    table = to_numpy(layer.embeddings)
    np.testing.assert_array_equal(output[:3], table[[1, 1, 1]])
    np.testing.assert_allclose(output[3:], hierarchical_table(table[2:], 0.5, 12), atol=1e-5)


def test_lengths_below_n_give_the_unmodified_model(bert_pair):
    plain, hierarchical = bert_pair
    ids = RNG.integers(1, 40, size=(2, N)).astype("int32")
    ids[1, 5:] = 0  # padding
    np.testing.assert_array_equal(
        to_numpy(hierarchical(inputs_of(ids))), to_numpy(plain(inputs_of(ids)))
    )


def test_roberta_and_gpt2_below_n_give_the_unmodified_model():
    for variant, application, options in [
        ("roberta", "encoder", {"type_vocab_size": 1, "max_position_embeddings": N + 1}),
        ("gpt2", "lm", {}),
    ]:
        config = dict(CONFIG, **options)
        plain = keras_attn.build_transformer_model(config, variant=variant, application=application)
        hierarchical = keras_attn.build_transformer_model(
            config, variant=variant, application=application, hierarchical_position=0.3
        )
        hierarchical.set_weights(plain.get_weights())
        ids = RNG.integers(3, 40, size=(2, N)).astype("int32")
        ids[0, :2] = plain.template.config.pad_token_id or 0
        inputs = {"token_ids": ids}
        np.testing.assert_array_equal(to_numpy(hierarchical(inputs)), to_numpy(plain(inputs)))
        assert hierarchical.input_contract.max_length == N * N, variant


def test_the_model_reads_past_n_with_the_formulas_rows(bert_pair):
    """Past `n` the model's embeddings are the formula's rows: the model
    equals the plain one whose position table is replaced by them (a plain
    model with a table of `n * n` rows)."""
    _, hierarchical = bert_pair
    assert hierarchical.input_contract.max_length == N * N
    table = to_numpy(hierarchical.get_layer("Embedding-Position").embeddings)
    long_plain = keras_attn.build_transformer_model(dict(CONFIG, max_position_embeddings=N * N))
    weights = {v.path: to_numpy(v) for v in hierarchical.weights}
    for variable in long_plain.weights:
        if variable.path.startswith("Embedding-Position"):
            variable.assign(hierarchical_table(table, 0.4, N * N).astype("float32"))
        else:
            variable.assign(weights[variable.path])
    ids = RNG.integers(1, 40, size=(2, 3 * N + 5)).astype("int32")
    np.testing.assert_allclose(
        to_numpy(hierarchical(inputs_of(ids))), to_numpy(long_plain(inputs_of(ids))),
        atol=1e-4, rtol=1e-4,
    )


def test_a_length_over_n_squared_is_an_error(bert_pair):
    _, hierarchical = bert_pair
    ids = np.ones((1, N * N + 1), "int32")
    with pytest.raises(ValueError, match=f"Sequence length {N * N + 1} exceeds the {N * N}"):
        hierarchical(inputs_of(ids))
    layer = keras_attn.layers.PositionEmbedding(N, 4, hierarchical=True)
    with pytest.raises(ValueError, match=f"exceeds the {N * N} positions.*hierarchical"):
        layer(np.zeros((1, N * N + 1, 1), "float32"))


def test_keras_file_round_trip(bert_pair, tmp_path):
    _, hierarchical = bert_pair
    path = str(tmp_path / "hierarchical.keras")
    hierarchical.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_layer("Embedding-Position").hierarchical is True
    assert loaded.input_contract.max_length == N * N
    ids = RNG.integers(1, 40, size=(1, 2 * N + 3)).astype("int32")
    np.testing.assert_allclose(
        to_numpy(loaded(inputs_of(ids))), to_numpy(hierarchical(inputs_of(ids))), atol=1e-6
    )


@pytest.fixture(scope="module")
def language_model():
    return keras_attn.build_transformer_model(
        CONFIG, application="lm", hierarchical_position=0.3
    )


def test_each_cached_step_past_n_equals_the_full_pass(language_model):
    forward = CachedForward(language_model)
    length, prompt = 2 * N + 4, 5
    ids = RNG.integers(3, 40, size=(2, length)).astype("int32")
    full = to_numpy(language_model(inputs_of(ids)))
    cache = forward.empty_cache(2, forward.capacity(prompt, length))
    logits, cache = forward(ids[:, :prompt], 0, cache)
    np.testing.assert_allclose(to_numpy(logits), full[:, :prompt], atol=1e-5, rtol=1e-5)
    for position in range(prompt, length):
        logits, cache = forward(ids[:, position : position + 1], position, cache)
        np.testing.assert_allclose(
            to_numpy(logits)[:, 0], full[:, position], atol=1e-5, rtol=1e-5,
            err_msg=f"position {position}",
        )


def test_generation_past_n_equals_uncached_greedy(language_model):
    prompts = [[2, 7, 9], [2, 11, 5, 31, 8]]
    generated = language_model.generate(prompts, max_new_tokens=2 * N)
    np.testing.assert_array_equal(generated, uncached_greedy(language_model, prompts, 2 * N))
    with pytest.raises(ValueError, match=f"exceeds the {N * N} positions"):
        language_model.generate(prompts, max_new_tokens=N * N)


@pytest.mark.parametrize("value", [1.0, 0, -0.2, "yes"])
def test_bad_alpha_is_refused(value):
    with pytest.raises(ValueError, match="hierarchical_position"):
        keras_attn.build_transformer_model(CONFIG, hierarchical_position=value)
    with pytest.raises(ValueError, match="hierarchical"):
        keras_attn.layers.PositionEmbedding(N, 4, hierarchical=value)


@pytest.mark.parametrize("variant", ["alibi", "roformer", "t5"])
def test_variants_without_a_position_table_refuse_it(variant):
    with pytest.raises(ValueError, match="hierarchical_position.*(position table|relative)"):
        keras_attn.build_transformer_model(CONFIG, variant=variant, hierarchical_position=True)
