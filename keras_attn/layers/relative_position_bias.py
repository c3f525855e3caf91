"""The base class of attention biases that depend on `i - j` and the head."""

import keras
from keras import ops

from keras_attn.layers import masking


@keras.saving.register_keras_serializable(package="keras_attn")
class RelativePositionBias(keras.layers.Layer):
    """An additive attention bias that is a function of `i - j` and the head;
    the base of ALiBi, KERPLE and Sandwich.

    A subclass defines `bias(distance)`: `distance` an integer tensor of `i - j`
    values of any static rank; it returns float32 `(heads,) + distance.shape`
    (`heads` 1 for a bias every head shares). A subclass's `build` must accept
    no shapes, so that `bias` works on a layer never called.

    Args:
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, ...)`; only its length is used.
        key: optional, defaults to `query`; only its length is used.
        by_distance: return `distance_table` instead (what attention layers
            take as `distance_bias`).

    Returns float32 `(1, heads, query_length, key_length)`, `[0, h, i, j]` equal
    to `bias(i - j)[h]`. The input's mask is dropped.

    Example:

    >>> class Linear(RelativePositionBias):
    ...     def bias(self, distance):
    ...         return -ops.abs(ops.cast(distance, "float32"))[None]
    >>> Linear()(x).shape  # (1, 1, length, length)
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # The input's padding mask does not apply to a bias over positions:
        # taken and dropped without Keras' warning.
        self.supports_masking = True

    def compute_mask(self, query, mask=None):
        return None

    def bias(self, distance):
        raise NotImplementedError(
            f"{type(self).__name__} must define `bias(distance)`, returning the "
            "float32 bias of shape (heads,) + distance.shape."
        )

    def build(self, query_shape=None, key_shape=None):
        # The built-in biases' weights do not depend on the input shapes.
        pass

    def call(self, query, key=None, by_distance=False):
        key = query if key is None else key
        query_length, key_length = ops.shape(query)[1], ops.shape(key)[1]
        if by_distance:
            return self.distance_table(query_length, key_length)
        distance = masking.relative_positions(query_length, key_length)
        return ops.cast(self.bias(distance), "float32")[None]

    def distance_table(self, query_length, key_length):
        """The bias once per distance, float32 `(1, heads, query_length + key_length
        - 1)`: entry `k` is the bias of `i - j = k - (key_length - 1)`."""
        distance = ops.arange(1 - key_length, query_length, dtype="int32")
        return ops.cast(self.bias(distance), "float32")[None]


def per_head(values, distance):
    """Per-head `values` `(heads,)` reshaped to broadcast against `distance`."""
    return ops.reshape(values, (-1,) + (1,) * len(distance.shape))


def gather_distance_bias(distance_bias, distance, key_length):
    """A `distance_table` `(batch, heads, query_length + key_length - 1)` gathered
    at the integer `distance` `(rows, columns)`: `(batch, heads, rows, columns)`;
    distances outside the table (masked keys only) take its nearest entry."""
    index = ops.clip(distance + (key_length - 1), 0, ops.shape(distance_bias)[-1] - 1)
    return ops.take(distance_bias, index, axis=-1)


def add_distance_bias(attention_bias, distance_bias, distance, key_length):
    """`attention_bias` (or None) plus `gather_distance_bias(...)`."""
    pairs = gather_distance_bias(distance_bias, distance, key_length)
    return pairs if attention_bias is None else attention_bias + pairs
