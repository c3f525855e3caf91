"""The local-window mask that makes relative-position models extrapolate."""

import keras
from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.multi_head_attention import check_positive_integer


@keras.saving.register_keras_serializable(package="keras_attn")
class LocalMaskBaseline(keras.layers.Layer):
    """Restricts every query to a window of keys the size of the training length.

    The "super strong baseline" of length extrapolation (Su Jianlin, 2023,
    "Transformer升级之路：7、长度外推性与局部注意力", kexue.fm): a model with relative positions fails on
    longer inputs because it meets relative distances it never saw and because
    attention entropy grows with the number of keys. At inference, letting each
    token see only a window as long as the training sequences removes both,
    with no retraining. ALiBi, KERPLE, Sandwich and XPOS behave like soft
    versions of this window.

    The band, with query index `i` and key index `j`:

    - `causal=True`: `i - window < j <= i` (the `window` most recent keys);
    - `causal=False`: `|i - j| <= window // 2`;
    - `blockwise=True` (causal, XPOS's blockwise attention): positions are cut
      into blocks of `window`; keys `j <= i` in the query's block or the block
      before it.

    The layer has no weights. It returns a boolean mask, `True` = may attend,
    of shape `(1, 1, query_length, key_length)`, which plugs into the
    `attention_mask` of `MultiHeadAttention` and `TalkingHeadsAttention`; those
    layers also take the window directly as `attention_window=`, which is what
    the builder uses (`build_transformer_model(..., attention_window=512)`).

    Args:
        window: the window size, usually the training length.
        causal: causal band (language models) or symmetric band (encoders).
        blockwise: blockwise causal attention instead of a sliding window.
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, ...)`; only its length is used.
        key: optional `(batch, key_length, ...)`; defaults to `query`.

    Example:

    >>> mask = keras_attn.LocalMaskBaseline(window=4, causal=True)(x)
    >>> y = keras_attn.MultiHeadAttention(4, 16)(x, attention_mask=mask)
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
