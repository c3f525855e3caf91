"""Token embeddings that can also project back onto the vocabulary."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class TokenEmbedding(keras.layers.Embedding):
    """`keras.layers.Embedding` whose table doubles as the output projection.

    `layer(token_ids)` looks rows up as usual; `layer(hidden, reverse=True)`
    returns `hidden @ E^T`, the tied-embedding logits over the vocabulary used
    by BERT's masked-LM head (Press & Wolf 2017, "Using the Output Embedding to
    Improve Language Models", https://arxiv.org/abs/1608.05859).

    Args: those of `keras.layers.Embedding`.

    Call arguments:
        inputs: integer ids, or `(..., output_dim)` features when `reverse`.
        reverse: project features onto the vocabulary instead of looking up.
    """

    def call(self, inputs, reverse=False):
        if reverse:
            return ops.matmul(inputs, ops.transpose(ops.cast(self.embeddings, inputs.dtype)))
        return super().call(inputs)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.input_dim,)
        return super().compute_output_shape(input_shape)

    def compute_output_spec(self, inputs, reverse=False):
        return keras.KerasTensor(
            self.compute_output_shape(inputs.shape, reverse),
            dtype=self.compute_dtype,
        )
