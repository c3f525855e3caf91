"""Top-k sampling: sample among the k most probable tokens."""

import keras
from keras import ops

from keras_attn.samplers.sampler import Sampler
from keras_attn.samplers.sampler import check_number


@keras.saving.register_keras_serializable(package="keras_attn")
class TopKSampler(Sampler):
    """Samples each row's token among its `k` largest logits, with
    probabilities renormalised over them:

        kept = { i : logits_i >= the k-th largest logit of the row }
        P(token = i) = softmax(logits / temperature)_i / sum_{j in kept} softmax(...)_j
                       for i in kept, 0 otherwise.

    Tokens tied with the k-th largest logit are all kept, so the set has
    more than `k` tokens only when there is such a tie (Hugging Face's
    `TopKLogitsWarper` does the same); `k` larger than the vocabulary keeps
    every token. `-inf` tokens are never returned. See `Sampler` for the
    seed and the guarantees. Reference: Fan et al. 2018, "Hierarchical
    Neural Story Generation", https://arxiv.org/abs/1805.04833.

    Args:
        k: an integer >= 1; how many of the most probable tokens to keep.
        temperature: a finite number > 0 that divides the logits.

    Example:

    >>> sampler = keras_attn.samplers.TopKSampler(k=10, temperature=0.7)
    >>> sampler(logits, seed=np.array([0, step], "int32"))   # (batch,) int32
    """

    def __init__(self, k, temperature=1.0):
        super().__init__(temperature=temperature)
        self.k = check_number("k", k, type(self).__name__, minimum=1, integer=True)

    def filter_logits(self, logits):
        return keep_top_k(logits, self.k)

    def get_config(self):
        return {"k": self.k, **super().get_config()}


def keep_top_k(logits, k):
    """`logits` with every entry below its row's k-th largest set to -inf."""
    vocab = logits.shape[-1]
    if vocab is not None and k >= vocab:
        return logits
    kth_largest = ops.top_k(logits, k, sorted=True)[0][:, k - 1 : k]
    return ops.where(ops.greater_equal(logits, kth_largest), logits, float("-inf"))
