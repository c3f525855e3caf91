"""BinaryRandomChoice: the successor at inference, a Bernoulli choice of
one of the two inputs while training."""

import math

import numpy as np
import pytest

import keras_attn
from tests.harness import run_layer_test
from tests.harness import to_numpy

RNG = np.random.default_rng(0)
PREDECESSOR = RNG.normal(size=(2, 5, 4)).astype("float32")
SUCCESSOR = RNG.normal(size=(2, 5, 4)).astype("float32")


def test_binary_random_choice_harness(tmp_path):
    run_layer_test(
        keras_attn.layers.BinaryRandomChoice,
        {"replacement_rate": 0.3, "seed": 1},
        inputs={"predecessor": PREDECESSOR, "successor": SUCCESSOR},
        expected_output_shape=(2, 5, 4),
        reference=lambda layer, inputs: inputs["successor"],
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("rate", [0.0, 0.3, 1.0])
def test_training_picks_the_successor_at_the_replacement_rate(rate):
    layer = keras_attn.layers.BinaryRandomChoice(rate, seed=7)
    draws = 300
    successes = 0
    for _ in range(draws):
        output = to_numpy(layer(PREDECESSOR, SUCCESSOR, training=True))
        # One draw for the whole batch: the output is one input, exactly.
        is_successor = np.array_equal(output, SUCCESSOR)
        assert is_successor or np.array_equal(output, PREDECESSOR)
        successes += is_successor
    # Binomial(300, rate): 5 standard deviations, exact at 0 and 1.
    spread = 5 * math.sqrt(draws * rate * (1 - rate))
    assert abs(successes - draws * rate) <= spread, successes


@pytest.mark.parametrize("rate", [-0.1, 1.5, True])
def test_rate_outside_zero_one_is_refused(rate):
    with pytest.raises(ValueError, match="replacement_rate"):
        keras_attn.layers.BinaryRandomChoice(rate)
