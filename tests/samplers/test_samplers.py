"""Samplers against numpy references written here: which tokens each
sampler can return, how often, and what it must never return."""

import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import samplers

BACKEND = keras.config.backend()
NEG_INF = -np.inf

# Three rows with distinct probabilities (rows differ: the first favours low
# ids, the second high ids, the third has forbidden tokens).
PROBABILITIES = np.array(
    [
        [0.30, 0.22, 0.16, 0.12, 0.08, 0.06, 0.04, 0.02],
        [0.02, 0.05, 0.08, 0.11, 0.14, 0.17, 0.20, 0.23],
        [0.40, 0.00, 0.25, 0.15, 0.00, 0.10, 0.06, 0.04],
    ]
)
with np.errstate(divide="ignore"):
    LOGITS = np.log(PROBABILITIES).astype("float32")

CASES = {
    "random": (samplers.RandomSampler(), dict()),
    "random_t0.5": (samplers.RandomSampler(temperature=0.5), dict(temperature=0.5)),
    "top_k3": (samplers.TopKSampler(k=3), dict(k=3)),
    "top_k3_t2": (samplers.TopKSampler(k=3, temperature=2.0), dict(k=3, temperature=2.0)),
    "top_p0.7": (samplers.TopPSampler(p=0.7), dict(p=0.7)),
    "top_p0.7_t0.6": (samplers.TopPSampler(p=0.7, temperature=0.6), dict(p=0.7, temperature=0.6)),
    "top_p0.8_k4_t1.5": (
        samplers.TopPSampler(p=0.8, k=4, temperature=1.5),
        dict(p=0.8, k=4, temperature=1.5),
    ),
    "top_p1": (samplers.TopPSampler(p=1.0), dict(p=1.0)),
}
SEEDS = 8
COPIES = 1250  # samples per row and seed: 10,000 per row in all
TOLERANCE = 0.02  # on a frequency; its standard error is at most 0.005


def softmax(logits):
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


def reference(logits_row, temperature=1.0, k=None, p=None, renormalise=True):
    """The probabilities a sampler must draw from, one row, in numpy: the
    temperature, then the top-k cut, then the nucleus by inclusive cumsum.
    `renormalise=False` is the wrong answer of a sampler that cuts the
    softmax without renormalising (the test of the tests)."""
    scaled = logits_row.astype("float64") / temperature
    kept = np.ones(scaled.shape, bool)
    if k is not None:
        kept &= scaled >= np.sort(scaled)[::-1][k - 1]
    probabilities = softmax(np.where(kept, scaled, NEG_INF))
    if p is not None:
        descending = np.sort(probabilities)[::-1]
        cumulative = np.cumsum(descending)
        # A fixture whose cumulative sums sit on p would test round-off.
        assert np.all(np.abs(cumulative - p) > 1e-3) or p == 1.0
        size = int(np.argmax(cumulative >= p - 1e-12)) + 1
        kept &= probabilities >= descending[size - 1]
    if not renormalise:
        return np.where(kept, softmax(scaled), 0.0)
    return np.where(kept, probabilities, 0.0) / probabilities[kept].sum()


def seed(*values):
    return ops.convert_to_tensor(np.array(values, "int32"))


@functools.lru_cache(maxsize=None)
def draw(case):
    """Samples of shape (rows, SEEDS * COPIES): each row tiled COPIES times
    in one batch, under SEEDS seeds."""
    sampler = CASES[case][0]
    batch = np.tile(LOGITS, (COPIES, 1))
    samples = [
        ops.convert_to_numpy(sampler(batch, seed(index, 11))).reshape(COPIES, len(LOGITS))
        for index in range(SEEDS)
    ]
    return np.concatenate(samples).T


@pytest.mark.parametrize("case", sorted(CASES))
def test_returned_tokens_are_exactly_the_allowed_set(case):
    samples = draw(case)
    assert samples.dtype == np.int32
    for row, logits_row in enumerate(LOGITS):
        allowed = set(np.flatnonzero(reference(logits_row, **CASES[case][1])))
        assert set(samples[row].tolist()) == allowed, (case, row)


@pytest.mark.parametrize("case", sorted(CASES))
def test_frequencies_match_renormalised_probabilities(case):
    samples = draw(case)
    for row, logits_row in enumerate(LOGITS):
        frequencies = np.bincount(samples[row], minlength=LOGITS.shape[1]) / samples.shape[1]
        expected = reference(logits_row, **CASES[case][1])
        np.testing.assert_allclose(frequencies, expected, atol=TOLERANCE, err_msg=f"{case} row {row}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_frequency_bound_rejects_a_missing_temperature_or_renormalisation(case):
    """The frequency test can fail: a sampler that ignored its temperature,
    or cut without renormalising, would be more than 2 * TOLERANCE away
    from the reference on some row (so its frequencies fail the bound)."""
    arguments = CASES[case][1]
    wrong = []
    if arguments.get("temperature", 1.0) != 1.0:
        wrong.append(dict(arguments, temperature=1.0))
    if "k" in arguments or arguments.get("p", 1.0) < 1.0:
        wrong.append(dict(arguments, renormalise=False))
    if not wrong:
        pytest.skip("plain softmax at temperature 1: nothing to get wrong but the sampling")
    for variant in wrong:
        distance = max(
            np.abs(reference(row, **variant) - reference(row, **arguments)).max() for row in LOGITS
        )
        assert distance > 2 * TOLERANCE, (case, variant, distance)


ALL_SAMPLERS = [samplers.GreedySampler()] + [case[0] for case in CASES.values()]


@pytest.mark.parametrize("sampler", ALL_SAMPLERS, ids=repr)
def test_never_returns_a_forbidden_token(sampler):
    logits = np.full((4, 6), NEG_INF, "float32")
    logits[0, 5] = 3.0  # the only finite token is the last one
    logits[1, 0] = -1e4  # very unlikely, but the only allowed token
    logits[2, [1, 3]] = [1e4, 1e4 - 30.0]  # large magnitudes
    logits[3] = NEG_INF  # nothing allowed: id 0
    for index in range(5):
        tokens = ops.convert_to_numpy(sampler(logits, seed(index, 3)))
        np.testing.assert_array_equal(tokens, [5, 0, 1, 0])


@pytest.mark.parametrize("sampler", ALL_SAMPLERS[1:], ids=repr)
def test_same_seed_same_tokens_other_seed_other_tokens(sampler):
    logits = np.tile(LOGITS, (COPIES, 1))  # the shape `draw` uses: no new compilations
    first = ops.convert_to_numpy(sampler(logits, seed(1, 2)))
    np.testing.assert_array_equal(first, ops.convert_to_numpy(sampler(logits, (1, 2))))
    for other in [(2, 1), (1, 3), (0, 2), (-1, 2)]:
        assert not np.array_equal(first, ops.convert_to_numpy(sampler(logits, seed(*other)))), other


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_greedy_is_numpy_argmax_with_ties_to_the_lowest_id(dtype):
    rng = np.random.default_rng(0)
    logits = rng.integers(0, 3, size=(64, 10)).astype("float32")  # many ties
    logits[:8] = 1.0  # whole rows tied
    tokens = samplers.GreedySampler()(ops.cast(logits, dtype), None)
    tokens = ops.convert_to_numpy(tokens)
    assert tokens.dtype == np.int32
    np.testing.assert_array_equal(tokens, np.argmax(logits, axis=-1))


def test_jit_with_the_seed_traced_matches_eager():
    """Every sampler inside one compiled function (one compilation keeps
    the test fast), called with two seeds: traced once, same ids as eager."""
    traces = []

    def sample_all(logits, seed):
        traces.append(1)
        return [sampler(logits, seed) for sampler in ALL_SAMPLERS]

    if BACKEND == "jax":
        import jax

        compiled = jax.jit(sample_all)
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(sample_all, jit_compile=True)
    else:
        pytest.skip("jit-compiled loops are for JAX and TensorFlow")
    for index in range(2):
        step_seed = seed(5, index)
        outputs = compiled(ops.convert_to_tensor(LOGITS), step_seed)
        for sampler, output in zip(ALL_SAMPLERS, outputs):
            np.testing.assert_array_equal(
                np.asarray(output), ops.convert_to_numpy(sampler(LOGITS, step_seed)), err_msg=repr(sampler)
            )
    assert len(traces) == 1, "the seed must be a traced argument, not a constant"


@pytest.mark.parametrize("sampler", ALL_SAMPLERS, ids=repr)
def test_config_round_trip(sampler):
    # Dicts in the format `keras.saving.serialize_keras_object` writes
    # (built by hand: calling it imports TensorFlow, seconds on JAX and torch).
    config = sampler.get_config()
    rebuilt = type(sampler).from_config(config)
    assert rebuilt.get_config() == config
    name = type(sampler).__name__
    assert keras.saving.get_registered_name(type(sampler)) == f"keras_attn>{name}"
    for class_name in [name, f"keras_attn>{name}"]:
        restored = samplers.get({"class_name": class_name, "config": config})
        assert type(restored) is type(sampler) and restored.get_config() == config
    restored = keras.saving.deserialize_keras_object(
        {"class_name": f"keras_attn>{name}", "config": config}
    )
    assert type(restored) is type(sampler) and restored.get_config() == config
    if sampler.needs_seed:
        np.testing.assert_array_equal(
            ops.convert_to_numpy(restored(LOGITS, seed(4, 4))),
            ops.convert_to_numpy(sampler(LOGITS, seed(4, 4))),
        )


def test_get_by_name_instance_and_unknown():
    assert type(samplers.get("greedy")) is samplers.GreedySampler
    assert samplers.get("random").get_config() == {"temperature": 1.0}
    assert samplers.get("top_k").get_config() == {"k": 5, "temperature": 1.0}
    assert samplers.get("top_p").get_config() == {"p": 0.9, "k": None, "temperature": 1.0}
    instance = samplers.TopKSampler(k=2)
    assert samplers.get(instance) is instance
    for unknown in ["nucleus", None, {"class_name": "BeamSampler", "config": {}}]:
        with pytest.raises(ValueError, match="greedy.*random.*top_k.*top_p|BeamSampler"):
            samplers.get(unknown)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: samplers.TopKSampler(k=0), "`k` must be an integer >= 1; received k=0"),
        (lambda: samplers.TopKSampler(k=2.5), "received k=2.5"),
        (lambda: samplers.TopKSampler(k=True), "received k=True"),
        (lambda: samplers.TopPSampler(p=0.9, k=-1), "TopPSampler: `k`.*received k=-1"),
        (lambda: samplers.TopPSampler(p=0.0), r"`p` must be a finite number > 0.0 and <= 1.0; received p=0.0"),
        (lambda: samplers.TopPSampler(p=1.5), "received p=1.5"),
        (lambda: samplers.TopPSampler(p=float("nan")), "received p=nan"),
        (lambda: samplers.RandomSampler(temperature=0), "`temperature` must be a finite number > 0.0; received temperature=0"),
        (lambda: samplers.TopKSampler(k=3, temperature=-1.0), "received temperature=-1.0"),
        (lambda: samplers.RandomSampler(temperature=float("inf")), "received temperature=inf"),
    ],
)
def test_invalid_arguments_are_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_bad_seed_and_logits_are_reported():
    sampler = samplers.TopKSampler(k=2)
    with pytest.raises(ValueError, match="TopKSampler draws at random and needs `seed`.*seed=None"):
        sampler(LOGITS, None)
    with pytest.raises(ValueError, match=r"shape \(2,\); received shape \(3,\)"):
        sampler(LOGITS, seed(1, 2, 3))
    with pytest.raises(ValueError, match=r"\(batch, vocab\); received shape \(8,\)"):
        sampler(LOGITS[0], seed(1, 2))
