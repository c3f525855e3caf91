"""Learned absolute position embeddings."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings, `P[offset + position]`.

    BERT adds row `i` of a learned `(max_position, dim)` table to token `i`.
    RoBERTa's tables start counting after the padding row: with
    `count_from_padding=True` and a padding mask, real tokens get positions
    `offset, offset + 1, ...` counted over real tokens only and padded tokens
    get row `offset - 1` (RoBERTa's padding row), which is exactly how
    Hugging Face's RoBERTa numbers positions, for left and right padding.

    A sequence longer than the table raises a `ValueError` naming both lengths
    (statically where the length is known when the graph is traced; otherwise
    the embedding lookup itself fails on out-of-range rows).

    Args:
        max_position: number of rows of the table.
        dim: embedding width.
        offset: row of the first position (2 for RoBERTa, 0 for BERT).
        count_from_padding: number real tokens only, from `padding_mask`.
        embeddings_initializer: initializer of the table.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(batch, length, ...)`; only its length is used.
        padding_mask: boolean `(batch, length)`, used with
            `count_from_padding`.
        positions: optional integer `(length,)` or `(batch, length)`: the
            positions of the tokens (row `offset + position`), for a decoding
            step whose tokens continue a cached sequence. A negative position
            takes row `offset - 1` (RoBERTa's padding row). Replaces the
            numbering from 0 and `padding_mask`.

    Returns `(batch, length, dim)` (the table rows broadcast over the batch,
    so that shape inference downstream keeps the batch dimension unknown
    rather than 1).
    """

    def __init__(
        self,
        max_position,
        dim,
        offset=0,
        count_from_padding=False,
        embeddings_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.max_position = max_position
        self.dim = dim
        self.offset = offset
        self.count_from_padding = count_from_padding
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, inputs_shape, padding_mask_shape=None, positions_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_position, self.dim),
            initializer=self.embeddings_initializer,
        )

    def call(self, inputs, padding_mask=None, positions=None):
        length = ops.shape(inputs)[1]
        if positions is not None:
            rows = ops.maximum(ops.cast(positions, "int32"), -1) + self.offset
            rows = ops.take(self.embeddings, rows, axis=0)
            return ops.broadcast_to(rows, (ops.shape(inputs)[0], length, self.dim))
        if isinstance(length, int) and length > self.max_length:
            raise ValueError(
                f"Sequence length {length} exceeds the {self.max_length} "
                f"positions the model was built with (max_position="
                f"{self.max_position}, offset={self.offset}); truncate the inputs."
            )
        if self.count_from_padding and padding_mask is not None:
            keep = ops.cast(padding_mask, "int32")
            positions = (ops.cumsum(keep, axis=1) - 1) * keep + self.offset - 1 + keep
            return ops.take(self.embeddings, positions, axis=0)
        positions = ops.arange(length, dtype="int32") + self.offset
        rows = ops.take(self.embeddings, positions, axis=0)[None, ...]
        return ops.broadcast_to(rows, (ops.shape(inputs)[0], length, self.dim))

    @property
    def max_length(self):
        """The longest sequence the table can number."""
        return self.max_position - self.offset

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
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
