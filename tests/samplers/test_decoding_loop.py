"""`keras_attn.samplers.decoding_loop.run_steps`: the steps it runs, against
the loop written out in numpy (step from the shortest prompt's last token
while some row is not done and the longest row is not full)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.samplers import decoding_loop


def reference_steps(lengths, limits, done_at):
    """The indices `run_steps` gives its body: numpy's loop. `done_at`:
    the step after which every row is done (None: only when full)."""
    index, done, indices = min(lengths) - 1, False, []
    while index < max(limits) - 1 and not done:
        indices.append(index)
        done = done_at is not None and len(indices) == done_at
        index += 1
    return indices


@pytest.mark.parametrize("done_check", ["each", "late", None])
@pytest.mark.parametrize("lengths,new_tokens", [([3, 5, 2], 4), ([6], 1), ([4, 4], 7)])
def test_the_steps_run_are_the_loops(lengths, new_tokens, done_check):
    """No row is done before the last step (the samplers without an end
    token): however `done` is read back, every step runs once, from the
    shortest prompt's last token to the longest row's end."""
    limits = [length + new_tokens for length in lengths]

    def body(index, tokens, cache, done):
        tokens = ops.where(ops.arange(tokens.shape[1]) == index + 1, index + 1, tokens)
        following = index + 1
        done = ops.greater_equal(following + 1, ops.convert_to_tensor(limits))
        return index + 1, tokens, cache + 1, done

    tokens = ops.zeros((len(lengths), max(limits)), "int32")
    state = (tokens, ops.convert_to_tensor(0), ops.zeros((len(lengths),), "bool"))
    tokens, cache, done = decoding_loop.run_steps(
        body, ops.convert_to_tensor(lengths), ops.convert_to_tensor(limits), state, done_check
    )
    expected = reference_steps(lengths, limits, None)
    assert int(ops.convert_to_numpy(cache)) == len(expected)
    written = ops.convert_to_numpy(tokens)[0]
    np.testing.assert_array_equal(written[min(lengths):], np.arange(min(lengths), max(limits)))
    assert np.all(ops.convert_to_numpy(done))


@pytest.mark.parametrize("done_check", ["each", "late"])
def test_a_batch_done_early_stops(done_check):
    """Every row done after the third step (an end token): the loop stops
    there, as numpy's does; reading `done` a step late, torch's loop runs
    one step more (the compiled `while_loop` of JAX and TensorFlow checks
    in the program)."""
    lengths, limits = [2, 3], [10, 11]

    def body(index, tokens, cache, done):
        cache = cache + 1
        return index + 1, tokens, cache, ops.broadcast_to(cache >= 3, (2,))

    state = (ops.zeros((2, 11), "int32"), ops.convert_to_tensor(0), ops.zeros((2,), "bool"))
    _, cache, _ = decoding_loop.run_steps(
        body, ops.convert_to_tensor(lengths), ops.convert_to_tensor(limits), state, done_check
    )
    late = done_check == "late" and keras.config.backend() == "torch"
    assert len(reference_steps(lengths, limits, 3)) == 3
    assert int(ops.convert_to_numpy(cache)) == 3 + late


def test_an_unknown_done_check_is_named():
    with pytest.raises(ValueError, match="`done_check`.*received True"):
        decoding_loop.run_steps(None, ops.ones((1,), "int32"), ops.ones((1,), "int32"), (), True)
