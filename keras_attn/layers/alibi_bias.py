"""ALiBi: attention with linear biases."""

import math

import keras
from keras import ops

from keras_attn.layers.relative_position_bias import RelativePositionBias
from keras_attn.layers.relative_position_bias import per_head


def alibi_slopes(heads):
    """ALiBi's per-head slopes: `2^(-8h/heads)`, `h = 1..heads`, for a power of
    two; else the `n` slopes of `n` heads (`n` the largest power of two below)
    and every other slope of `2n` heads."""
    def geometric(count):
        return [2.0 ** (-8.0 * (h + 1) / count) for h in range(count)]

    if heads & (heads - 1) == 0:
        return geometric(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return geometric(closest) + geometric(2 * closest)[0::2][: heads - closest]


@keras.saving.register_keras_serializable(package="keras_attn")
class ALiBiBias(RelativePositionBias):
    """Additive linear distance penalties, one slope per head (Press, Smith,
    Lewis, 2022, https://arxiv.org/abs/2108.12409).

    With slope `m_h` (`alibi_slopes`): causal `bias_h(i, j) = m_h (j - i)`;
    bidirectional (encoders) `-m_h |i - j|`. No weights; used without absolute
    position embeddings. Called and returned as `RelativePositionBias`.

    Args:
        heads: number of attention heads.
        causal: causal or symmetric form.
        **kwargs: base layer arguments.
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
