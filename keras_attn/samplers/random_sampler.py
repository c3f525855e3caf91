"""Plain sampling from the softmax of the logits."""

import keras

from keras_attn.samplers.sampler import Sampler


@keras.saving.register_keras_serializable(package="keras_attn")
class RandomSampler(Sampler):
    """Samples each row's token from the whole softmax:

        P(token = i) = softmax(logits / temperature)_i

    Tokens with a `-inf` logit have probability 0 and are never returned.
    See `Sampler` for the seed, the guarantees and how the draw is made.

    Args:
        temperature: a finite number > 0 that divides the logits.

    Example:

    >>> sampler = keras_attn.samplers.RandomSampler(temperature=0.8)
    >>> sampler(logits, seed=np.array([0, step], "int32"))   # (batch,) int32
    """
