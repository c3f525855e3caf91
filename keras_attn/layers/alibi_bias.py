"""ALiBi: attention with linear biases."""

import math

import keras
from keras import ops

from keras_attn.layers.relative_position_bias import RelativePositionBias
from keras_attn.layers.relative_position_bias import per_head


def alibi_slopes(heads):
    """The per-head slopes of ALiBi.

    For `heads` a power of two, `2^(-8h/heads)` for `h = 1..heads`. Otherwise,
    with `n` the largest power of two below `heads`, the `n` slopes of `n`
    heads followed by every other slope of `2n` heads (the paper's rule).
    """
    def geometric(count):
        return [2.0 ** (-8.0 * (h + 1) / count) for h in range(count)]

    if heads & (heads - 1) == 0:
        return geometric(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return geometric(closest) + geometric(2 * closest)[0::2][: heads - closest]


@keras.saving.register_keras_serializable(package="keras_attn")
class ALiBiBias(RelativePositionBias):
    """Additive linear distance penalties, one slope per head.

    Press, Smith, Lewis (2022), "Train Short, Test Long: Attention with Linear
    Biases Enables Input Length Extrapolation", https://arxiv.org/abs/2108.12409.
    With slope `m_h` (see `alibi_slopes`):

    - causal (language models): `bias_h(i, j) = m_h (j - i)`, which is
      `-m_h |i - j|` on every key a causal mask leaves visible;
    - bidirectional (encoders): the symmetric `bias_h(i, j) = -m_h |i - j|`.

    The layer has no weights; used without absolute position embeddings. As
    every `RelativePositionBias`, `bias(distance)` gives the bias of any
    tensor of distances `i - j`, `(heads,) + distance.shape`.

    Args:
        heads: number of attention heads.
        causal: causal or symmetric form.
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, ...)`; only its length is used.
        key: optional, defaults to `query`.

    Returns the bias, `(1, heads, query_length, key_length)`, float32.
    """

    def __init__(self, heads, causal=False, **kwargs):
        super().__init__(**kwargs)
        self.heads = heads
        self.causal = causal

    def bias(self, distance):
        distance = ops.cast(distance, "float32")
        if not self.causal:
            distance = ops.abs(distance)
        slopes = per_head(ops.convert_to_tensor(alibi_slopes(self.heads), "float32"), distance)
        return -slopes * distance

    def get_config(self):
        config = super().get_config()
        config.update({"heads": self.heads, "causal": self.causal})
        return config
