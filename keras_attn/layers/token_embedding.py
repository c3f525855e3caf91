"""Token embeddings that can also project back onto the vocabulary."""

import keras
from keras import ops

from keras_attn import keras_internals


@keras.saving.register_keras_serializable(package="keras_attn")
class TokenEmbedding(keras.layers.Embedding):
    """`keras.layers.Embedding` whose table doubles as the output projection.

    `layer(token_ids)` looks rows up; `layer(hidden, reverse=True)` returns
    `hidden @ E^T`, the tied-embedding logits (Press & Wolf 2017,
    https://arxiv.org/abs/1608.05859), keeping `hidden`'s Keras mask.
    `quantize("int8")` stores int8 rows with one scale each, used in both
    directions (the reverse projection divides `hidden @ E_int8^T` by the
    scales); other modes raise `NotImplementedError`.

    Args:
        lookup_scale: None, or a number multiplying looked-up rows (cast to
            the compute dtype first, as transformers' Gemma); not the reverse.
        *args, **kwargs: those of `keras.layers.Embedding`.

    Call arguments:
        inputs: integer ids, or `(..., output_dim)` features when `reverse`.
        reverse: project features onto the vocabulary.
    """

    def __init__(self, *args, lookup_scale=None, **kwargs):
        super().__init__(*args, **kwargs)
        if lookup_scale is not None and (
            not isinstance(lookup_scale, (int, float)) or isinstance(lookup_scale, bool)
        ):
            raise ValueError(f"`lookup_scale` must be None or a number; received {lookup_scale!r}.")
        self.lookup_scale = lookup_scale
        # A reverse projection keeps its features' Keras mask (the padding).
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        if keras.backend.is_float_dtype(inputs.dtype):
            return mask  # reverse: the features' mask
        return super().compute_mask(inputs, mask)

    def call(self, inputs, reverse=False):
        if reverse:
            return ops.matmul(inputs, ops.transpose(ops.cast(self.embeddings, inputs.dtype)))
        return self._scaled(super().call(inputs))

    def _scaled(self, rows):
        if self.lookup_scale is None:
            return rows
        return ops.multiply(rows, ops.cast(self.lookup_scale, rows.dtype))

    def quantize(self, mode=None, type_check=True, config=None):
        if mode != "int8":
            raise NotImplementedError(
                f"{self.name}: TokenEmbedding supports quantization mode 'int8' "
                f"(its reverse projection must dequantize the table); received {mode!r}."
            )
        super().quantize(mode, type_check=False, config=config)

    # Keras' hook for an int8 layer's computation (see
    # `keras_internals.embedding_int8_lookup`).
    def _int8_call(self, inputs, reverse=False, training=None):
        if not reverse:
            return self._scaled(
                keras_internals.embedding_int8_lookup(self, inputs, training=training)
            )
        # The table is `E = E_int8 / scale[:, None]`, one scale per vocabulary
        # row, so `hidden @ E^T` divides column `v` of `hidden @ E_int8^T`.
        table = keras_internals.int8_embedding_table(self)
        logits = ops.matmul(inputs, ops.transpose(ops.cast(table, inputs.dtype)))
        logits = ops.divide(logits, ops.cast(self.embeddings_scale, inputs.dtype))
        if self.lora_enabled:
            delta = ops.matmul(self.lora_embeddings_a, self.lora_embeddings_b)
            delta = ops.cast((self.lora_alpha / self.lora_rank) * delta, inputs.dtype)
            logits = ops.add(logits, ops.matmul(inputs, ops.transpose(delta)))
        return logits

    def get_config(self):
        return {**super().get_config(), "lookup_scale": self.lookup_scale}

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.input_dim,)
        return super().compute_output_shape(input_shape)

    def compute_output_spec(self, inputs, reverse=False):
        return keras.KerasTensor(
            self.compute_output_shape(inputs.shape, reverse),
            dtype=self.compute_dtype,
        )
