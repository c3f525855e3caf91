"""Linear-chain conditional random field over per-token emission scores."""

import keras
import numpy as np
from keras import ops

from keras_attn.concrete import concrete_values
from keras_attn.concrete import first_invalid_label
from keras_attn.layers.dot_product_attention import large_negative

# A position whose emissions are all at or below this is padding. The layer
# writes `large_negative(compute dtype)` there (at most -45850, float16's),
# far below any real emission score.
PADDING_THRESHOLD = -2e4
# Added to the emission of a label `decode(starts=, ends=)` rules out: every
# path through it scores below any allowed path.
FORBIDDEN = -1e9


@keras.saving.register_keras_serializable(package="keras_attn")
class ConditionalRandomField(keras.layers.Layer):
    """Linear-chain CRF (Lafferty et al., 2001), as bert4keras's.

    The layer owns a `(num_labels, num_labels)` transition matrix `T`; its
    input is emission scores `E`, `(batch, length, num_labels)`. A label path
    `y` over the real positions `t_1 < ... < t_n` of a row scores

        s(y) = sum_k E[t_k, y_k] + sum_{k>1} T[y_{k-1}, y_k]

    with probability `exp(s(y)) / Z` (`log Z` by the forward algorithm in log
    space). Padding (the Keras mask, or `mask`) may be anywhere: the path skips
    it. The output is the emissions, with `large_negative(dtype)` (at most
    -45850) at padding, so `loss`, `accuracy` and `decode` find the padding
    (emissions all at or below -2e4) without a mask; it carries no Keras mask.

    `lr_multiplier` (bert4keras's): the variable stored (`get_weights`,
    checkpoints) is `T / lr_multiplier`, so its gradient is `lr_multiplier`
    times `T`'s; `transitions` is `T`.

    Args:
        lr_multiplier: the transitions' learning-rate multiplier (> 0).
        **kwargs: base layer arguments.

    Call arguments:
        inputs: emission scores, `(batch, length, num_labels)`.
        mask: optional boolean `(batch, length)`, `True` at real positions;
            defaults to the Keras mask of `inputs`.
        decode: return the Viterbi paths (as `decode`) instead.

    `crf.loss` (for `compile`) is `log Z - s(y_true)` per row, `y_true` integer
    labels `(batch, length[, 1])`, ignored at padding; `crf.accuracy` the share
    of real positions where `argmax(E)` is the label. A label outside `[0,
    num_labels)` at a real position raises a ValueError with concrete values
    and makes the loss NaN (zero gradient) in a traced step: mark positions to
    ignore as padding, not -100.

    Example:

    >>> crf = keras_attn.layers.ConditionalRandomField(lr_multiplier=100)
    >>> model = keras.Model(inputs, crf(emissions))
    >>> model.compile("adam", loss=crf.loss, metrics=[crf.accuracy])
    >>> paths = crf.decode(model.predict(token_ids))   # (batch, length) labels
    """

    def __init__(self, lr_multiplier=1, **kwargs):
        super().__init__(**kwargs)
        if isinstance(lr_multiplier, bool) or not (
            isinstance(lr_multiplier, (int, float, np.integer, np.floating)) and lr_multiplier > 0
        ):
            raise ValueError(
                f"ConditionalRandomField: `lr_multiplier` must be a positive number; "
                f"received {lr_multiplier!r}."
            )
        self.lr_multiplier = lr_multiplier
        self.supports_masking = True

    def build(self, input_shape):
        num_labels = input_shape[-1]
        if num_labels is None:
            raise ValueError(
                "ConditionalRandomField: the last axis of the emissions (num_labels) "
                f"must be known; received input shape {tuple(input_shape)}."
            )
        multiplier = self.lr_multiplier

        def initializer(shape, dtype=None):
            return keras.initializers.GlorotUniform()(shape, dtype) / multiplier

        self._transitions = self.add_weight(
            name="transitions", shape=(num_labels, num_labels), initializer=initializer
        )

    @property
    def transitions(self):
        """The transition matrix `T`, `T[i, j]` the score of label `j` after `i`."""
        return ops.cast(self._transitions, "float32") * float(self.lr_multiplier)

    def call(self, inputs, mask=None, decode=False, starts=None, ends=None):
        if decode:
            return self._viterbi(inputs, mask, starts, ends)
        if mask is None:
            return inputs
        mask = ops.cast(mask, "bool")[..., None]
        dtype = keras.backend.standardize_dtype(inputs.dtype)
        return ops.where(mask, inputs, ops.cast(large_negative(dtype), dtype))

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs, mask=None, decode=False, starts=None, ends=None):
        if decode:
            return keras.KerasTensor(inputs.shape[:-1], dtype="int32")
        return keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)

    def decode(self, emissions, mask=None, starts=None, ends=None):
        """Viterbi best label paths, int32 `(batch, length)`, 0 at padding.

        Padding comes from `mask` when given, else from the emissions. On a
        symbolic tensor it adds the decoding to a functional model. `starts` and
        `ends` (label ids; None: any) constrain each row's first and last real
        label, as bert4keras's `ViterbiDecoder(trans, starts=[0], ends=[0])`;
        ValueError for an empty or out-of-range set.
        """
        starts = self._label_set(starts, "starts")
        ends = self._label_set(ends, "ends")
        return self(emissions, mask=mask, decode=True, starts=starts, ends=ends)

    def _label_set(self, labels, argument):
        """`labels` as a sorted tuple, or None; ValueError naming `argument`."""
        if labels is None:
            return None
        labels = tuple(labels)
        bad = [
            label for label in labels
            if isinstance(label, bool) or not isinstance(label, (int, np.integer))
            or not 0 <= label < self._num_labels
        ]
        if not labels or bad:
            raise ValueError(
                f"{type(self).__name__}.decode: `{argument}` must be label ids in [0, "
                f"num_labels={self._num_labels}), at least one; received {list(labels)}."
            )
        return tuple(sorted({int(label) for label in labels}))

    def negative_log_likelihood(self, y_true, emissions, mask=None):
        """`log Z - s(y_true)` per row, float32 `(batch,)`, 0 for a row with no real
        position; invalid labels as in the class docstring."""
        emissions, valid = self._emissions_and_mask(emissions, mask)
        labels = ops.convert_to_tensor(y_true)
        if len(labels.shape) == 3:
            labels = ops.squeeze(labels, axis=-1)
        self.check_labels(labels, valid)
        # Compared before the cast to int32, which could wrap a huge label or
        # truncate a fraction.
        known = ops.logical_and(
            ops.greater_equal(labels, ops.cast(0, labels.dtype)),
            ops.less(labels, ops.cast(self._num_labels, labels.dtype)),
        )
        if "float" in keras.backend.standardize_dtype(labels.dtype):
            known = ops.logical_and(known, ops.equal(labels, ops.floor(labels)))
        respected = ops.all(ops.logical_or(known, ops.logical_not(valid)))
        labels = ops.where(ops.logical_and(valid, known), ops.cast(labels, "int32"), 0)
        transitions = self.transitions
        num_labels = ops.shape(transitions)[0]
        flat_transitions = ops.reshape(transitions, (-1,))

        def step(carry, inputs):
            alpha, started, previous, score = carry
            emission, real, label = inputs
            arriving = ops.logsumexp(alpha[:, :, None] + transitions[None], axis=1)
            forward = ops.where(started[:, None], arriving, 0.0) + emission
            alpha = ops.where(real[:, None], forward, alpha)
            emitted = ops.take_along_axis(emission, label[:, None], axis=1)[:, 0]
            moved = ops.take(flat_transitions, previous * num_labels + label)
            gained = emitted + ops.where(started, moved, 0.0)
            score = score + ops.where(real, gained, 0.0)
            previous = ops.where(real, label, previous)
            return alpha, ops.logical_or(started, real), previous, score

        batch = ops.shape(emissions)[0]
        init = (
            ops.zeros_like(emissions[:, 0]),
            ops.zeros((batch,), "bool"),
            ops.zeros((batch,), "int32"),
            ops.zeros((batch,), "float32"),
        )
        xs = (
            ops.transpose(emissions, (1, 0, 2)),
            ops.transpose(valid, (1, 0)),
            ops.transpose(labels, (1, 0)),
        )
        alpha, started, _, score = [x[-1] for x in scan_carries(step, init, xs)]
        log_partition = ops.where(started, ops.logsumexp(alpha, axis=-1), 0.0)
        # Out-of-range labels were read as 0 above, so that no backend reads
        # out of bounds; they poison the loss (not its gradient) here.
        return ops.where(respected, log_partition - score, float("nan"))

    def check_labels(self, y_true, mask):
        """ValueError naming the first label of concrete `y_true` at a real position
        that is not in `[0, num_labels)`; nothing for traced tensors."""
        labels, valid = concrete_values(y_true), concrete_values(mask)
        if labels is None or valid is None:
            return
        invalid = first_invalid_label(labels, self._num_labels, valid)
        if invalid:
            position, label, count = invalid
            raise ValueError(
                f"{type(self).__name__}: label {label} at position {position} (row, "
                f"token) of `y_true` is not a label id in [0, num_labels="
                f"{self._num_labels}) ({count} such labels at real positions). "
                "Labels at padding positions are ignored: to leave a position out, mark "
                "it as padding (the Keras mask of the emissions, e.g. "
                "Embedding(mask_zero=True), or `mask=`) instead of giving it a label "
                "such as -1 or -100."
            )

    @property
    def _num_labels(self):
        return int(self._transitions.shape[0])

    def loss(self, y_true, y_pred):
        """`negative_log_likelihood`, for `compile(loss=crf.loss)`."""
        return self.negative_log_likelihood(y_true, y_pred)

    def accuracy(self, y_true, y_pred):
        """Frame-wise accuracy of the batch, for `compile(metrics=[crf.accuracy])`."""
        emissions, valid = self._emissions_and_mask(y_pred, None)
        labels = ops.cast(y_true, "int32")
        if len(labels.shape) == 3:
            labels = ops.squeeze(labels, axis=-1)
        hits = ops.equal(ops.cast(ops.argmax(emissions, axis=-1), "int32"), labels)
        hits = ops.logical_and(hits, valid)
        return ops.divide_no_nan(
            ops.sum(ops.cast(hits, "float32")), ops.sum(ops.cast(valid, "float32"))
        )

    def _emissions_and_mask(self, emissions, mask):
        """Float32 emissions, 0 at padding, and the boolean real-position mask."""
        emissions = ops.cast(emissions, "float32")
        if mask is None:
            valid = ops.greater(ops.max(emissions, axis=-1), PADDING_THRESHOLD)
        else:
            valid = ops.cast(mask, "bool")
        return ops.where(valid[..., None], emissions, 0.0), valid

    def _viterbi(self, emissions, mask, starts=None, ends=None):
        emissions, valid = self._emissions_and_mask(emissions, mask)
        emissions = self._constrain_ends(emissions, valid, starts, ends)
        transitions = self.transitions
        num_labels = ops.shape(transitions)[0]
        stay = ops.arange(num_labels, dtype="int32")[None, :]

        def forward(carry, inputs):
            score, started, _ = carry
            emission, real = inputs
            candidates = score[:, :, None] + transitions[None]
            best = ops.max(candidates, axis=1)
            came_from = ops.cast(ops.argmax(candidates, axis=1), "int32")
            extended = ops.where(started[:, None], best, 0.0) + emission
            score = ops.where(real[:, None], extended, score)
            # Where nothing was decided (padding, first real position) the
            # pointer keeps the label, so backtracking walks through.
            moved = ops.logical_and(real, started)[:, None]
            pointer = ops.where(moved, came_from, stay)
            return score, ops.logical_or(started, real), pointer

        batch = ops.shape(emissions)[0]
        init = (
            ops.zeros_like(emissions[:, 0]),
            ops.zeros((batch,), "bool"),
            ops.zeros_like(emissions[:, 0], dtype="int32"),
        )
        xs = (ops.transpose(emissions, (1, 0, 2)), ops.transpose(valid, (1, 0)))
        scores, _, pointers = scan_carries(forward, init, xs)

        def backward(label, pointer):
            return ops.take_along_axis(pointer, label[:, None], axis=1)[:, 0]

        last = ops.cast(ops.argmax(scores[-1], axis=-1), "int32")
        # Step t (from the end) leaves the label of position t - 1.
        earlier = scan_carries(backward, last, pointers, reverse=True)
        path = ops.transpose(ops.concatenate([earlier[1:], last[None]], axis=0), (1, 0))
        return ops.where(valid, path, 0)

    def _constrain_ends(self, emissions, valid, starts, ends):
        """`emissions` with `FORBIDDEN` added outside `starts` at each row's first real
        position and outside `ends` at its last."""
        length = ops.shape(valid)[1]
        positions = ops.arange(length, dtype="int32")[None, :]
        for labels, edge in ((starts, "first"), (ends, "last")):
            if labels is None:
                continue
            real = ops.cast(valid, "int32")
            if edge == "first":
                index = ops.argmax(real, axis=1)
            else:
                index = length - 1 - ops.argmax(ops.flip(real, axis=1), axis=1)
            at_edge = ops.logical_and(
                ops.equal(positions, ops.cast(index, "int32")[:, None]), valid
            )
            outside = np.ones((self._num_labels,), bool)
            outside[list(labels)] = False
            barred = ops.logical_and(at_edge[:, :, None], ops.convert_to_tensor(outside)[None, None])
            emissions = ops.where(barred, emissions + FORBIDDEN, emissions)
        return emissions

    def get_config(self):
        config = super().get_config()
        config.update({"lr_multiplier": self.lr_multiplier})
        return config


def scan_carries(step, init, xs, reverse=False):
    """The stacked carries of `carry = step(carry, x)` over the leading axis of
    `xs`: `keras.ops.scan`, but `tf.scan` on TensorFlow, which sets the
    `maximum_iterations` XLA needs to differentiate the loop."""
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        return tf.scan(step, xs, initializer=init, reverse=reverse)

    def keras_step(carry, x):
        carry = step(carry, x)
        return carry, carry

    return ops.scan(keras_step, init, xs, reverse=reverse)[1]
