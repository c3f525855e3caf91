"""Top-p (nucleus) sampling."""

import keras
from keras import ops

from keras_attn.samplers.sampler import Sampler
from keras_attn.samplers.sampler import check_number
from keras_attn.samplers.top_k_sampler import keep_top_k


@keras.saving.register_keras_serializable(package="keras_attn")
class TopPSampler(Sampler):
    """Nucleus sampling: samples each row's token among the smallest set of
    most probable tokens whose total probability reaches `p`.

    After dividing the logits by `temperature` and, if `k` is given, keeping
    only the `k` largest (as `TopKSampler` does), with probabilities
    `q = softmax(logits)` sorted in decreasing order `q_(1) >= q_(2) >= ...`:

        n = min { m : q_(1) + ... + q_(m) >= p }       (so n >= 1)
        kept = { i : q_i >= q_(n) }
        P(token = i) = q_i / sum_{j in kept} q_j   for i in kept, 0 otherwise.

    The most probable token is always kept; tokens tied with `q_(n)` are all
    kept. `p = 1` keeps every token of nonzero probability. `-inf` tokens
    are never returned. With `k` set this is bert4keras's
    `random_sample(topk=k, topp=p)`. See `Sampler` for the seed and the
    guarantees. Reference: Holtzman et al. 2020, "The Curious Case of Neural
    Text Degeneration", https://arxiv.org/abs/1904.09751.

    Args:
        p: the probability mass to keep; 0 < p <= 1.
        k: None, or an integer >= 1: keep only the `k` most probable tokens
            first.
        temperature: a finite number > 0 that divides the logits (before
            the nucleus is chosen, so it changes which tokens are kept).

    Example:

    >>> sampler = keras_attn.samplers.TopPSampler(p=0.9, k=50)
    >>> sampler(logits, seed=np.array([0, step], "int32"))   # (batch,) int32
    """

    def __init__(self, p, k=None, temperature=1.0):
        super().__init__(temperature=temperature)
        name = type(self).__name__
        self.p = check_number("p", p, name, minimum=0.0, maximum=1.0)
        self.k = None if k is None else check_number("k", k, name, minimum=1, integer=True)

    def filter_logits(self, logits):
        if self.k is not None:
            logits = keep_top_k(logits, self.k)
        descending = ops.flip(ops.sort(logits, axis=-1), axis=-1)
        probabilities = ops.softmax(descending, axis=-1)
        mass_before = ops.subtract(ops.cumsum(probabilities, axis=-1), probabilities)
        # Position 0 explicitly: a row without a finite logit has NaN mass.
        in_nucleus = ops.logical_or(
            ops.less(mass_before, self.p),
            ops.equal(ops.arange(ops.shape(logits)[-1]), 0),
        )
        smallest_kept = ops.amin(
            ops.where(in_nucleus, descending, float("inf")), axis=-1, keepdims=True
        )
        return ops.where(ops.greater_equal(logits, smallest_kept), logits, float("-inf"))

    def get_config(self):
        return {"p": self.p, "k": self.k, **super().get_config()}
