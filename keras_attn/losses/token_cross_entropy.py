"""Cross-entropy averaged over the tokens that count."""

import keras
import numpy as np
from keras import ops

from keras_attn.concrete import concrete_values
from keras_attn.concrete import first_invalid_label


@keras.saving.register_keras_serializable(package="keras_attn")
class TokenCrossEntropy(keras.losses.Loss):
    """Token-level cross-entropy averaged over the real tokens of the whole batch:

        loss = sum_{b,i: y_bi != ignore_id} -log p(y_bi) / #{b,i: y_bi != ignore_id}

    independent of how much padding a batch has. T-TA's objective takes the
    input ids as targets; a masked LM sets targets to `ignore_id` except at
    masked positions.

    Every label is `ignore_id` or an integer id in `[0, vocab_size)`
    (`vocab_size` the last axis of `y_pred`); `y_true` has `y_pred`'s shape
    without it (ValueError otherwise). Another label (HF's -100 with the
    default `ignore_id`) raises a `ValueError` naming it with concrete values
    and makes the batch's loss NaN in a traced step.

    Args:
        ignore_id: the target id that contributes nothing, an integer.
        from_logits: whether predictions are logits.
        **kwargs: `keras.losses.Loss` arguments (`name`, `dtype`).

    Example:

    >>> model.compile(optimizer="adam", loss=keras_attn.TokenCrossEntropy(ignore_id=0))
    """

    def __init__(self, ignore_id=0, from_logits=True, name="token_cross_entropy", **kwargs):
        if not isinstance(ignore_id, (int, np.integer)) or isinstance(ignore_id, bool):
            raise ValueError(
                f"`ignore_id` must be an integer label id; received {ignore_id!r}."
            )
        # "sum": `call` already divides by the number of counted tokens.
        super().__init__(name=name, reduction="sum", **kwargs)
        self.ignore_id = int(ignore_id)
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        vocab_size = y_pred.shape[-1]
        if vocab_size is None:
            vocab_size = ops.shape(y_pred)[-1]
        y_true = self._check_shapes(y_true, y_pred)
        self.check_labels(y_true, vocab_size)
        # Compared before the cast to int32, which could wrap a huge label.
        ignored = ops.equal(y_true, ops.cast(self.ignore_id, y_true.dtype))
        in_vocabulary = ops.logical_and(
            ops.greater_equal(y_true, ops.cast(0, y_true.dtype)),
            ops.less(y_true, ops.cast(vocab_size, y_true.dtype)),
        )
        if _is_float(y_true):
            in_vocabulary = ops.logical_and(in_vocabulary, ops.equal(y_true, ops.floor(y_true)))
        counted = ops.logical_and(in_vocabulary, ops.logical_not(ignored))
        # Out-of-contract labels are replaced by 0 for the cross-entropy so
        # that no backend errors or reads out of bounds, then poison the loss.
        losses = keras.losses.sparse_categorical_crossentropy(
            ops.where(counted, ops.cast(y_true, "int32"), 0), y_pred, from_logits=self.from_logits
        )
        counted = ops.cast(counted, losses.dtype)
        losses = losses * counted / ops.maximum(ops.sum(counted), 1.0)
        respected = ops.all(ops.logical_or(ignored, in_vocabulary))
        return ops.where(respected, losses, ops.cast(float("nan"), losses.dtype))

    def _check_shapes(self, y_true, y_pred):
        """`y_true` checked against `y_pred` without its vocabulary axis (a trailing
        axis of 1 is squeezed)."""
        expected = tuple(y_pred.shape[:-1])
        if len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == 1:
            y_true = ops.squeeze(y_true, axis=-1)
        found = tuple(y_true.shape)
        if len(found) != len(expected) or any(
            a is not None and b is not None and a != b for a, b in zip(found, expected)
        ):
            raise ValueError(
                f"{type(self).__name__}: `y_true` must have the shape of `y_pred` "
                f"without its vocabulary axis, {expected}; received y_true shape "
                f"{found} for y_pred shape {tuple(y_pred.shape)}."
            )
        return y_true

    def check_labels(self, y_true, vocab_size):
        """ValueError naming the first label of concrete `y_true` neither `ignore_id`
        nor in `[0, vocab_size)`; nothing for traced tensors."""
        values = concrete_values(y_true)
        if values is None:
            return
        vocab_size = int(vocab_size)
        invalid = first_invalid_label(values, vocab_size, values != self.ignore_id)
        if invalid:
            position, label, count = invalid
            raise ValueError(
                f"{type(self).__name__}: label {label} at position {position} of "
                f"`y_true` is neither `ignore_id={self.ignore_id}` nor a vocabulary "
                f"id in [0, {vocab_size}) ({count} such labels in all). "
                "For Hugging Face's -100 convention pass `ignore_id=-100`."
            )

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update({"ignore_id": self.ignore_id, "from_logits": self.from_logits})
        return config


def _is_float(x):
    return "float" in keras.backend.standardize_dtype(x.dtype)
