"""The local-window mask that makes relative-position models extrapolate."""

import keras
from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.multi_head_attention import check_positive_integer


@keras.saving.register_keras_serializable(package="keras_attn")
class LocalMaskBaseline(keras.layers.Layer):
    """Restricts every query to a window of keys the size of the training length.

    The "super strong baseline" of length extrapolation (Su Jianlin, 2023,
    "Transformer升级之路：7、长度外推性与局部注意力", kexue.fm): with a
    training-length window, a relative-position model meets no unseen
    distance and no growth in attention entropy, with no retraining.

    Returns `masking.local_mask`'s boolean `(1, 1, query_length, key_length)`
    band for `attention_mask` (attention layers also take `attention_window=`).
    No weights.

    Args:
        window: the window size, a positive integer.
        causal: causal band (language models) or symmetric band (encoders).
        blockwise: blockwise causal attention (XPOS) instead of a sliding window.
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, ...)`; only its length is used.
        key: optional `(batch, key_length, ...)`; defaults to `query`.

    Example:

    >>> mask = keras_attn.LocalMaskBaseline(window=4, causal=True)(x)
    """

    def __init__(self, window, causal=False, blockwise=False, **kwargs):
        super().__init__(**kwargs)
        check_positive_integer("window", window)
        self.window = window
        self.causal = causal
        self.blockwise = blockwise

    def call(self, query, key=None):
        key = query if key is None else key
        return masking.local_mask(
            ops.shape(query)[1],
            ops.shape(key)[1],
            self.window,
            causal=self.causal,
            blockwise=self.blockwise,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {"window": self.window, "causal": self.causal, "blockwise": self.blockwise}
        )
        return config
