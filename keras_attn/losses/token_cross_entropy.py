"""Cross-entropy averaged over the tokens that count."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class TokenCrossEntropy(keras.losses.Loss):
    """Token-level cross-entropy, averaged over real (non-ignored) tokens of
    the whole batch.

        loss = sum_{b,i: y_bi != ignore_id} -log p(y_bi) / #{b,i: y_bi != ignore_id}

    T-TA's all-token objective is this with the input ids as targets and the
    padding id ignored: every real token is a target. A masked LM uses the
    same loss with targets set to `ignore_id` except at the masked positions.
    Averaging over real tokens (not over all positions, not per sequence)
    keeps the loss of a batch independent of how much padding it has.

    Args:
        ignore_id: target id that contributes nothing (the padding id).
        from_logits: whether predictions are logits (the builder's heads
            return logits).
        **kwargs: `keras.losses.Loss` arguments (`name`, `dtype`).

    Example:

    >>> model.compile(optimizer="adam", loss=keras_attn.TokenCrossEntropy(ignore_id=0))
    >>> model.fit({"token_ids": ids}, ids)   # T-TA: predict every input token
    """

    def __init__(self, ignore_id=0, from_logits=True, name="token_cross_entropy", **kwargs):
        # "sum": `call` already divides by the number of counted tokens.
        super().__init__(name=name, reduction="sum", **kwargs)
        self.ignore_id = ignore_id
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        losses = keras.losses.sparse_categorical_crossentropy(
            y_true, y_pred, from_logits=self.from_logits
        )
        counted = ops.cast(ops.not_equal(y_true, self.ignore_id), losses.dtype)
        return losses * counted / ops.maximum(ops.sum(counted), 1.0)

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update({"ignore_id": self.ignore_id, "from_logits": self.from_logits})
        return config
