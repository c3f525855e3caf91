"""Learned absolute position embeddings."""

import numbers

import keras
from keras import ops

from keras_attn.layers import masking

# bert4keras's default weight of the coarse position in `hierarchical=True`.
DEFAULT_HIERARCHICAL_ALPHA = 0.4


@keras.saving.register_keras_serializable(package="keras_attn")
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings, `P[offset + position]`.

    BERT adds row `i` of a learned `(max_position, dim)` table to token `i`.
    With `count_from_padding=True` and a padding mask, real tokens count
    `offset, offset + 1, ...` over real tokens only and padding takes row
    `offset - 1`, as HF's RoBERTa (left or right padding).

    Hierarchical positions (Su 2020, bert4keras's `hierarchical_position`)
    number `n * n` positions from the `n` rows `p` after `offset`: with
    `u_k = (p_k - alpha p_0) / (1 - alpha)`, position `i n + j` gets
    `alpha u_i + (1 - alpha) u_j` (the first `n` keep their rows exactly).
    A sequence longer than `max_length` is a `ValueError` where its length is
    known.

    Args:
        max_position: number of rows of the table.
        dim: embedding width.
        offset: row of the first position (2 for RoBERTa, 0 for BERT).
        count_from_padding: number real tokens only, from `padding_mask`.
        hierarchical: `False`, `True` (`alpha = 0.4`) or `alpha` in `(0, 1)`.
        embeddings_initializer: initializer of the table.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(batch, length, ...)`; only its length is used.
        padding_mask: boolean `(batch, length)`, with `count_from_padding`.
        positions: optional integer `(length,)` or `(batch, length)` positions
            (a decoding step), replacing the numbering; negative: row
            `offset - 1`.

    Returns `(batch, length, dim)`.

    Example:

    >>> PositionEmbedding(64, 16, hierarchical=True).max_length
    4096
    """

    def __init__(
        self,
        max_position,
        dim,
        offset=0,
        count_from_padding=False,
        hierarchical=False,
        embeddings_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hierarchical is None:
            hierarchical = False
        if not isinstance(hierarchical, bool) and not (
            isinstance(hierarchical, numbers.Real) and 0 < hierarchical < 1
        ):
            raise ValueError(
                "`hierarchical` must be True, False or a float alpha in (0, 1); "
                f"received {hierarchical!r}."
            )
        self.max_position = max_position
        self.dim = dim
        self.offset = offset
        self.count_from_padding = count_from_padding
        self.hierarchical = hierarchical if isinstance(hierarchical, bool) else float(hierarchical)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, inputs_shape, padding_mask_shape=None, positions_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_position, self.dim),
            initializer=self.embeddings_initializer,
        )

    def call(self, inputs, padding_mask=None, positions=None):
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        if positions is not None:
            positions = ops.maximum(ops.cast(positions, "int32"), -1)
        elif isinstance(length, int) and length > self.max_length:
            raise ValueError(
                f"Sequence length {length} exceeds the {self.max_length} "
                f"positions the model was built with (max_position="
                f"{self.max_position}, offset={self.offset}"
                f"{', hierarchical' if self.hierarchical else ''}); truncate the inputs."
            )
        elif self.count_from_padding and padding_mask is not None:
            positions = masking.real_token_positions(padding_mask)
        else:
            positions = ops.arange(length, dtype="int32")
        rows = self._embed_positions(positions)
        if len(rows.shape) == 2:
            rows = rows[None, ...]
        return ops.broadcast_to(rows, (batch, length, self.dim))

    def _embed_positions(self, positions):
        """The embeddings of integer `positions` (each `>= -1`), `positions.shape + (dim,)`."""
        if not self.hierarchical:
            return ops.take(self.embeddings, positions + self.offset, axis=0)
        rows_per_level = self.max_position - self.offset
        alpha = self.alpha
        first = ops.take(self.embeddings, self.offset, axis=0)
        spread = (self.embeddings - alpha * first) / (1 - alpha)
        beyond = ops.maximum(positions, rows_per_level)  # keeps the gathers in range
        coarse = ops.take(spread, beyond // rows_per_level + self.offset, axis=0)
        fine = ops.take(spread, beyond % rows_per_level + self.offset, axis=0)
        # Below `n` the formula gives the table's own rows; they are looked
        # up directly so that those positions are bit-for-bit unchanged.
        direct = ops.take(
            self.embeddings, ops.minimum(positions, rows_per_level - 1) + self.offset, axis=0
        )
        return ops.where(
            (positions < rows_per_level)[..., None], direct, alpha * coarse + (1 - alpha) * fine
        )

    @property
    def alpha(self):
        """The weight of the coarse position with `hierarchical`, else None."""
        if self.hierarchical is False:
            return None
        return DEFAULT_HIERARCHICAL_ALPHA if self.hierarchical is True else self.hierarchical

    @property
    def max_length(self):
        """The longest sequence the table numbers: its rows from `offset`, squared
        with `hierarchical`."""
        rows = self.max_position - self.offset
        return rows * rows if self.hierarchical else rows

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None, positions_shape=None):
        return (inputs_shape[0], inputs_shape[1], self.dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_position": self.max_position,
                "dim": self.dim,
                "offset": self.offset,
                "count_from_padding": self.count_from_padding,
                "hierarchical": self.hierarchical,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
