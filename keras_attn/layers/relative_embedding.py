"""DeBERTa's shared table of relative-position embeddings."""

import keras
from keras import ops

from keras_attn.layers.multi_head_attention import check_positive_integer


@keras.saving.register_keras_serializable(package="keras_attn")
class RelativeEmbedding(keras.layers.Layer):
    """`2 * span` learned embeddings of relative positions, one table per model,
    optionally layer-normalised (DeBERTa's `encoder.rel_embeddings`; He et al.,
    2021, https://arxiv.org/abs/2006.03654).

    Row `r` embeds the (bucketed) relative position `r - span`; each
    `DisentangledAttention` projects it with its own projections. The model
    hands it to every block as `distance_bias`.

    Args:
        span: relative positions on each side, a positive integer (DeBERTa's
            `position_buckets` or `max_relative_positions`).
        width: the embeddings' width.
        normalize: apply a LayerNorm (sublayer `norm`) to the table.
        epsilon: that LayerNorm's epsilon.
        embeddings_initializer: initializer of the table.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: any tensor of the model; ties the table into the graph.
        by_distance: accepted for the position-bias interface.

    Returns the `(2 * span, width)` table in the compute dtype.

    Example:

    >>> keras_attn.layers.RelativeEmbedding(4, 16)(hidden).shape
    (8, 16)
    """

    def __init__(self, span, width, normalize=False, epsilon=1e-7,
                 embeddings_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_integer("span", span)
        check_positive_integer("width", width)
        self.span, self.width = span, width
        self.normalize, self.epsilon = normalize, epsilon
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.norm = None
        if normalize:
            self.norm = keras.layers.LayerNormalization(
                epsilon=epsilon, dtype=self.dtype_policy, name="norm"
            )
        # The hidden states' padding mask does not apply to the table.
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return None

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(2 * self.span, self.width),
            initializer=self.embeddings_initializer,
        )
        if self.norm is not None:
            self.norm.build((2 * self.span, self.width))

    def call(self, inputs=None, by_distance=True):
        table = ops.cast(self.embeddings, self.compute_dtype)
        return table if self.norm is None else self.norm(table)

    def compute_output_shape(self, inputs_shape=None):
        return (2 * self.span, self.width)

    def get_config(self):
        config = super().get_config()
        config.update({
            "span": self.span,
            "width": self.width,
            "normalize": self.normalize,
            "epsilon": self.epsilon,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        })
        return config
