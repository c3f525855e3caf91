"""Attention masks derived from token and segment ids."""

import keras
from keras import ops

from keras_attn.layers import masking

MASK_MODES = ("bidirectional", "unilm")


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionMask(keras.layers.Layer):
    """Builds the boolean self-attention mask of a Transformer from its inputs.

    `True`: query `i` may attend to key `j`. Padding keys are always masked
    (padded queries keep their row, so their outputs stay finite); causal masks
    are the attention layers' `use_causal_mask`. On top of that:

    - `"bidirectional"` (BERT): nothing else; shape `(batch, 1, length)`.
    - `"unilm"` (Dong et al. 2019, https://arxiv.org/abs/1905.03197): segment 0
      attends bidirectionally within itself, segment 1 to segment 0 and
      causally to itself: with `s_i` the cumulative sum of the segment ids,
      `i` sees `j` iff `s_j <= s_i`.

    `mask_diagonal=True` also masks `j == i` (T-TA); the mask is then
    `(batch, length, length)`.

    Args:
        mode: `"bidirectional"` or `"unilm"`; ValueError otherwise.
        pad_token_id: the padding id when no `padding_mask` is given.
        mask_diagonal: also mask `j == i`.
        **kwargs: base layer arguments.

    Call arguments:
        token_ids: integer `(batch, length)`.
        segment_ids: integer `(batch, length)`; required for `"unilm"`.
        padding_mask: optional `(batch, length)`, True/1 for real tokens.
    """

    def __init__(self, mode="bidirectional", pad_token_id=0, mask_diagonal=False, **kwargs):
        super().__init__(**kwargs)
        if mode not in MASK_MODES:
            raise ValueError(f"`mode` must be one of {MASK_MODES}; received {mode!r}.")
        self.mode = mode
        self.pad_token_id = pad_token_id
        self.mask_diagonal = mask_diagonal

    def call(self, token_ids, segment_ids=None, padding_mask=None):
        keep = masking.real_tokens(token_ids, self.pad_token_id, padding_mask)
        orders = None
        if self.mode == "unilm":
            if segment_ids is None:
                raise ValueError("The 'unilm' mask needs `segment_ids`.")
            orders = masking.unilm_orders(segment_ids)
        positions = None
        if self.mask_diagonal:
            positions = ops.arange(ops.shape(token_ids)[1], dtype="int32")
        return masking.sequence_mask(keep, orders, orders, positions, positions)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mode": self.mode,
                "pad_token_id": self.pad_token_id,
                "mask_diagonal": self.mask_diagonal,
            }
        )
        return config
