"""Token ids and counts given to `generate` and `AutoRegressiveDecoder` are
integers: a float, a string or a bool is a ValueError naming the argument
and the value, on every backend (issue 34, item 4)."""

import numpy as np
import pytest

import keras_attn

CONFIG = dict(
    vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=24, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2,
)
PROMPTS = [[2, 7, 9], [2, 11]]


@pytest.fixture(scope="module")
def model():
    return keras_attn.build_transformer_model(CONFIG, application="lm")


@pytest.mark.parametrize(
    "argument, value",
    [
        ("end_token_id", 2.5),
        ("end_token_id", 2.0),
        ("end_token_id", "2"),
        ("end_token_id", True),
        ("start_token_id", 3.5),
        ("start_token_id", "3"),
        ("min_new_tokens", 1.5),
        ("min_new_tokens", "1"),
    ],
)
def test_a_non_integer_setting_is_refused_by_name(model, argument, value):
    with pytest.raises(ValueError, match=rf"`{argument}` must be .*integer.*{value!r}"):
        model.generate(PROMPTS, 3, **{argument: value})


def test_the_same_under_beam_search(model):
    beams = keras_attn.samplers.BeamSearch(2)
    with pytest.raises(ValueError, match=r"`end_token_id` must be .*2\.5"):
        model.generate(PROMPTS, 3, end_token_id=2.5, sampler=beams)


def test_an_integer_end_token_stops_a_row(model):
    """The check does not refuse what works: numpy integers are ids."""
    first = model.generate(PROMPTS, 3)[:, 0]
    end = np.int64(first[0])
    tokens = model.generate(PROMPTS, 3, end_token_id=end, min_new_tokens=np.int32(0))
    assert tokens[0, 0] == end


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(end_id=3.5), r"AutoRegressiveDecoder: `end_id` must be .*integer.*3\.5"),
        (dict(end_id="3"), r"AutoRegressiveDecoder: `end_id` must be .*'3'"),
        (dict(start_id=3.5), r"AutoRegressiveDecoder: `start_id` must be .*3\.5"),
        (dict(end_id=30), r"AutoRegressiveDecoder: `end_id=30` is outside the vocabulary"),
    ],
)
def test_auto_regressive_decoder_ids_are_checked_when_built(model, arguments, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.AutoRegressiveDecoder(model, maxlen=4, **arguments)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(max_new_tokens=True), r"`max_new_tokens` must be a positive integer; received True \(bool\)"),
        (dict(max_new_tokens=3, min_new_tokens=True), r"`min_new_tokens` must be an integer.*True"),
        (dict(max_new_tokens=3, start_token_id=True), r"`start_token_id` must be .*True"),
        (dict(max_new_tokens=3, seed=True, sampler="random"), r"seed.*True"),
    ],
)
def test_a_bool_is_refused_for_every_integer_argument(model, arguments, message):
    with pytest.raises(ValueError, match=message):
        model.generate(PROMPTS, **arguments)


def test_a_bool_number_of_beams_is_refused(model):
    with pytest.raises(ValueError, match=r"num_beams.*True"):
        model.generator.beam_search(PROMPTS, 3, num_beams=True)


def test_a_rotary_model_refuses_impossible_lengths_before_allocating():
    """A model without a position table has no length limit of its own;
    `generate` names the sizes instead of numpy's "Unable to allocate
    7.28 TiB": past int32 positions, and past the machine's memory."""
    llama = keras_attn.build_transformer_model(dict(CONFIG, model_type="llama"))
    with pytest.raises(ValueError, match=(
        r"max_new_tokens=1000000000000 after the longest prompt \(3 tokens\) makes sequences "
        r"of 1000000000003 positions, more than the 2147483647 .*int32.*"
        r"has no position table.*max_position_embeddings=24"
    )):
        llama.generate(PROMPTS, 10**12)
    with pytest.raises(ValueError, match=(
        r"max_new_tokens=2147483640 .* decoding 8 row\(s\) of them needs at least "
        r"[\d.]+ TiB .* more than this machine's [\d.]+ [GT]iB of memory"
    )):
        llama.generate(PROMPTS * 4, 2**31 - 8)
