"""Beam search settings for `Generator.generate` and `Generator.beam_search`."""

import math

import keras

from keras_attn.samplers.sampler import check_number


@keras.saving.register_keras_serializable(package="keras_attn")
class BeamSearch:
    """Beam search with `num_beams` beams per prompt and a length penalty.

    Not a `Sampler`: beam search keeps several sequences per prompt and
    reorders them every step, so the decoding loop runs it itself (see
    `keras_attn.generation.Generator.beam_search` for the exact algorithm).
    Passed as `generate(..., sampler=BeamSearch(...))`, it returns the best
    sequence of each prompt.

    Args:
        num_beams: an integer >= 1; `num_beams=1` is greedy decoding.
        length_penalty: a finite number; the beams are ranked at the end by
            `score / length ** length_penalty` (0: by the summed
            log-probability; > 0 favours longer sequences).

    Example:

    >>> model.generate(prompts, max_new_tokens=32, end_token_id=3,
    ...                sampler=keras_attn.samplers.BeamSearch(num_beams=4))
    """

    def __init__(self, num_beams, length_penalty=0.0):
        self.num_beams = check_number("num_beams", num_beams, type(self).__name__, minimum=1, integer=True)
        valid = isinstance(length_penalty, (int, float)) and not isinstance(length_penalty, bool)
        if not valid or not math.isfinite(length_penalty):
            raise ValueError(
                f"BeamSearch: `length_penalty` must be a finite number; received "
                f"length_penalty={length_penalty!r}."
            )
        self.length_penalty = float(length_penalty)

    def get_config(self):
        return {"num_beams": self.num_beams, "length_penalty": self.length_penalty}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"BeamSearch(num_beams={self.num_beams}, length_penalty={self.length_penalty})"
