"""Multi-label categorical cross-entropy (Su, 2020), dense and sparse."""

import keras
from keras import ops

# Stands for "minus infinity" in the log-sum-exps: finite, so that a row with
# nothing to sum (all-padding labels) gives log(1 + 0) = 0 rather than NaN.
_EXCLUDED = -1e30


def _log_one_plus_sum_exp(scores, included):
    """`log(1 + sum_{included} exp(scores))` over the last axis, float32."""
    scores = ops.where(included, scores, _EXCLUDED)
    zeros = ops.zeros_like(scores[..., :1])
    return ops.logsumexp(ops.concatenate([scores, zeros], axis=-1), axis=-1)


def multilabel_categorical_crossentropy(y_true, y_pred):
    """Multi-label categorical cross-entropy (Su, 2020,
    https://kexue.fm/archives/7359), bert4keras's, per row of the last axis:

        loss = log(1 + sum_{i in P} exp(-s_i)) + log(1 + sum_{j not in P} exp(s_j))

    with `P` the classes where `y_true` (0/1, the shape of `y_pred`) is 1 and
    `s` the logits `y_pred` `(..., num_classes)`: a class is positive when its
    logit is above 0. Returns the float32 loss per row, `y_pred.shape[:-1]`.
    """
    scores = ops.cast(y_pred, "float32")
    positive = ops.greater(ops.cast(y_true, "float32"), 0.5)
    return _log_one_plus_sum_exp(-scores, positive) + _log_one_plus_sum_exp(
        scores, ops.logical_not(positive)
    )


@keras.saving.register_keras_serializable(package="keras_attn")
class SparseMultilabelCrossEntropy(keras.losses.Loss):
    """`multilabel_categorical_crossentropy` with the positive classes given as
    distinct class ids (bert4keras's `sparse_multilabel_categorical_crossentropy`),
    for GlobalPointer's `length * length` classes.

    With `P` the listed ids, `lse_P = logsumexp_{i in P} s_i` and
    `lse_A = log(1 + sum_{all j} exp(s_j))`,

        loss = log(1 + sum_{i in P} exp(-s_i)) + lse_A + log(1 - exp(lse_P - lse_A))

    the factor `1 - exp(...)` clipped below at 1e-7 as bert4keras does.

    Args:
        mask_zero: id 0 is padding, never a positive, and class 0 never a
            negative.
        span_labels: `False`: `y_true` is ids `(..., num_positive)`, `y_pred`
            logits `(..., num_classes)`. `True` (GlobalPointer): `y_true` is
            `(batch, heads, entities, 2)` `(start, end)` pairs, `y_pred`
            `(batch, heads, length, length)`, span `(i, j)` class
            `i * length + j`; a sample's loss sums its heads.
        **kwargs: `keras.losses.Loss` arguments.

    Example:

    >>> loss = keras_attn.losses.SparseMultilabelCrossEntropy(span_labels=True)
    """

    def __init__(
        self, mask_zero=True, span_labels=False, name="sparse_multilabel_cross_entropy", **kwargs
    ):
        super().__init__(name=name, **kwargs)
        self.mask_zero = mask_zero
        self.span_labels = span_labels

    def call(self, y_true, y_pred):
        ids = ops.cast(y_true, "int32")
        scores = ops.cast(y_pred, "float32")
        if self.span_labels:
            length = ops.shape(scores)[-1]
            ids = ids[..., 0] * length + ids[..., 1]
            scores = ops.reshape(scores, (ops.shape(scores)[0], ops.shape(scores)[1], -1))
        positive = ops.ones_like(ids, dtype="bool")
        counted = ops.ones_like(scores, dtype="bool")
        if self.mask_zero:
            positive = ops.not_equal(ids, 0)
            classes = ops.arange(ops.shape(scores)[-1])
            counted = ops.broadcast_to(ops.not_equal(classes, 0), ops.shape(scores))
        positive_scores = ops.take_along_axis(scores, ids, axis=-1)
        positive_loss = _log_one_plus_sum_exp(-positive_scores, positive)
        all_loss = _log_one_plus_sum_exp(scores, counted)
        positive_share = ops.logsumexp(ops.where(positive, positive_scores, _EXCLUDED), axis=-1)
        rest = ops.clip(1.0 - ops.exp(positive_share - all_loss), 1e-7, 1.0)
        loss = positive_loss + all_loss + ops.log(rest)
        if self.span_labels:
            loss = ops.sum(loss, axis=1)
        return loss

    def get_config(self):
        config = super().get_config()
        config.update({"mask_zero": self.mask_zero, "span_labels": self.span_labels})
        return config
