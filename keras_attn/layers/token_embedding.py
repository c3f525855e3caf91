"""Token embeddings that can also project back onto the vocabulary."""

import keras
from keras import ops

from keras_attn import keras_internals


@keras.saving.register_keras_serializable(package="keras_attn")
class TokenEmbedding(keras.layers.Embedding):
    """`keras.layers.Embedding` whose table doubles as the output projection.

    `layer(token_ids)` looks rows up as usual; `layer(hidden, reverse=True)`
    returns `hidden @ E^T`, the tied-embedding logits over the vocabulary used
    by BERT's masked-LM head (Press & Wolf 2017, "Using the Output Embedding to
    Improve Language Models", https://arxiv.org/abs/1608.05859).

    Quantization: `layer.quantize("int8")` (or `model.quantize("int8")`)
    stores the table as int8 with one scale per vocabulary row, as
    `keras.layers.Embedding` does, and both directions use it: a lookup
    divides the int8 rows by their scales, and the reverse projection
    computes `(hidden @ E_int8^T) / scale`, which equals `hidden` times the
    dequantized table without materialising it. Other modes raise
    `NotImplementedError` (so `model.quantize` leaves the table in float
    with a warning).

    Args:
        lookup_scale: None, or a number multiplying the rows a lookup
            returns (cast to the compute dtype first, as transformers casts
            Gemma's `sqrt(hidden_size)` to the weights' dtype); the reverse
            projection is unscaled.
        *args, **kwargs: those of `keras.layers.Embedding`.

    Call arguments:
        inputs: integer ids, or `(..., output_dim)` features when `reverse`.
        reverse: project features onto the vocabulary instead of looking up.
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
