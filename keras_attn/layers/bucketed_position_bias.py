"""T5's learned relative position bias, by logarithmic distance buckets."""

import math

import keras
from keras import ops

from keras_attn.layers.relative_position_bias import RelativePositionBias


def distance_buckets(distance, num_buckets, max_distance, bidirectional):
    """T5's bucket of each distance `i - j` (int tensor): half the buckets (all
    when causal) hold distances `0 .. num_buckets // 2 - 1` exactly, the rest
    logarithmically larger ones up to `max_distance`, the last bucket every
    distance beyond. Bidirectionally keys after the query take the other half;
    causally they share bucket 0."""
    # Hugging Face's and Mesh TensorFlow's `relative_position` is `j - i`.
    relative = -ops.cast(distance, "int32")
    buckets = ops.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + ops.cast(ops.greater(relative, 0), "int32") * num_buckets
        relative = ops.abs(relative)
    else:
        relative = -ops.minimum(relative, 0)
    max_exact = num_buckets // 2
    # The logarithm of the large distances only (small ones take `relative`),
    # in float32 as the reference implementations compute it.
    scaled = ops.log(ops.cast(ops.maximum(relative, max_exact), "float32") / max_exact)
    scaled = scaled / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    large = ops.minimum(max_exact + ops.cast(scaled, "int32"), num_buckets - 1)
    return buckets + ops.where(ops.less(relative, max_exact), relative, large)


@keras.saving.register_keras_serializable(package="keras_attn")
class BucketedPositionBias(RelativePositionBias):
    """A learned bias per head and distance bucket: T5's relative position
    encoding (Raffel et al., 2020, https://arxiv.org/abs/1910.10683, §2.1).

    Buckets are `distance_buckets`'; one bias serves every block of a stack
    (see `RelativePositionBias`).

    Args:
        heads: number of attention heads.
        num_buckets: number of buckets (T5: 32).
        max_distance: the distance from which keys share the last bucket (T5:
            128); ValueError unless beyond the exact buckets.
        bidirectional: whether keys after the query have buckets of their own.
        embeddings_initializer: of the `(num_buckets, heads)` table.

    Example:

    >>> BucketedPositionBias(heads=4, bidirectional=False)(np.zeros((1, 6, 8))).shape
    (1, 4, 6, 6)
    """

    def __init__(
        self,
        heads,
        num_buckets=32,
        max_distance=128,
        bidirectional=True,
        embeddings_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
        if max_exact < 1 or max_distance <= max_exact:
            raise ValueError(
                "BucketedPositionBias needs at least one exact bucket and a "
                f"`max_distance` beyond them ({max_exact} exact buckets); received "
                f"num_buckets={num_buckets}, max_distance={max_distance}, "
                f"bidirectional={bidirectional}."
            )
        self.heads = heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, query_shape=None, key_shape=None):
        if self.built:
            return
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.num_buckets, self.heads),
            initializer=self.embeddings_initializer,
        )
        self.built = True

    def bias(self, distance):
        if not self.built:
            self.build()
        buckets = distance_buckets(
            distance, self.num_buckets, self.max_distance, self.bidirectional
        )
        values = ops.take(ops.cast(self.embeddings, "float32"), buckets, axis=0)
        return ops.moveaxis(values, -1, 0)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "heads": self.heads,
                "num_buckets": self.num_buckets,
                "max_distance": self.max_distance,
                "bidirectional": self.bidirectional,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
