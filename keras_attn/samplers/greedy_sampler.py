"""Greedy decoding: the most probable token."""

import keras

from keras_attn.samplers.sampler import Sampler


@keras.saving.register_keras_serializable(package="keras_attn")
class GreedySampler(Sampler):
    """Returns the token with the largest logit of each row, the lowest id
    among ties; needs no seed (`needs_seed = False`).

        token = min { i : logits_i = max_j logits_j }

    Deterministic, identical on every backend; a row with no finite logit
    gives id 0.

    Example:

    >>> sampler = keras_attn.samplers.GreedySampler()
    >>> sampler(np.array([[0.0, 2.0, 2.0, -np.inf]]), seed=None)   # -> [1]
    """

    needs_seed = False

    def __init__(self):
        super().__init__(temperature=1.0)

    def get_config(self):
        return {}
