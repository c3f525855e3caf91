"""Attention masks derived from token and segment ids."""

import keras
from keras import ops

from keras_attn.layers import masking

MASK_MODES = ("bidirectional", "causal", "unilm")


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionMask(keras.layers.Layer):
    """Builds the boolean self-attention mask of a Transformer from its inputs.

    `True` means query `i` may attend to key `j`. Padding keys are always
    masked; padded queries keep their row so that their (unused) outputs stay
    finite. On top of that:

    - `"bidirectional"` (BERT encoders): nothing else; shape `(batch, 1, length)`.
    - `"causal"` (left-to-right LM): `j <= i`; shape `(batch, length, length)`.
    - `"unilm"` (seq2seq LM, Dong et al. 2019, "Unified Language Model
      Pre-training for Natural Language Understanding and Generation",
      https://arxiv.org/abs/1905.03197): the first segment (segment id 0)
      attends bidirectionally within itself, the second segment attends to
      the first and causally to itself. With `s_i` the cumulative sum of the
      segment ids, `i` may attend to `j` iff `s_j <= s_i`.

    Args:
        mode: one of `"bidirectional"`, `"causal"`, `"unilm"`.
        pad_token_id: token id treated as padding when no `padding_mask` is
            given.
        **kwargs: base layer arguments.

    Call arguments:
        token_ids: integer `(batch, length)`.
        segment_ids: integer `(batch, length)`; required for `"unilm"`.
        padding_mask: optional boolean/integer `(batch, length)`, `True`/1 for
            real tokens; replaces the comparison with `pad_token_id`.
    """

    def __init__(self, mode="bidirectional", pad_token_id=0, **kwargs):
        super().__init__(**kwargs)
        if mode not in MASK_MODES:
            raise ValueError(f"`mode` must be one of {MASK_MODES}; received {mode!r}.")
        self.mode = mode
        self.pad_token_id = pad_token_id

    def call(self, token_ids, segment_ids=None, padding_mask=None):
        if padding_mask is None:
            keep = ops.not_equal(token_ids, self.pad_token_id)
        else:
            keep = ops.cast(padding_mask, "bool")
        mask = keep[:, None, :]
        if self.mode == "causal":
            length = ops.shape(token_ids)[1]
            mask = ops.logical_and(mask, masking.causal_mask(length, length)[0])
        elif self.mode == "unilm":
            if segment_ids is None:
                raise ValueError("The 'unilm' mask needs `segment_ids`.")
            position = ops.cumsum(ops.cast(segment_ids, "int32"), axis=1)
            mask = ops.logical_and(
                mask, ops.less_equal(position[:, None, :], position[:, :, None])
            )
        return mask

    def get_config(self):
        config = super().get_config()
        config.update({"mode": self.mode, "pad_token_id": self.pad_token_id})
        return config
