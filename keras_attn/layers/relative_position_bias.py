"""The base class of attention biases that depend on `i - j` and the head."""

import keras
from keras import ops

from keras_attn.layers import masking


@keras.saving.register_keras_serializable(package="keras_attn")
class RelativePositionBias(keras.layers.Layer):
    """An additive attention bias that is a function of the signed distance
    `i - j` between query `i` and key `j` (and of the head).

    ALiBi, KERPLE and Sandwich are subclasses. A subclass defines one method,
    `bias(distance)`, the public extension point:

    - `distance`: an integer tensor of any static rank holding values of
      `i - j` (e.g. the `(query_length, key_length)` matrix, or the distances
      of one block of queries against a neighbourhood of keys);
    - returns a float32 tensor of shape `(heads,) + distance.shape`, where
      `heads` is the number of heads, or 1 for a bias that every head shares;
      entry `[h, ...]` is head `h`'s bias at that distance.

    `call` evaluates `bias` on the dense matrix of distances. Because the bias
    depends on positions only through `i - j`, a caller can also ask for the
    bias of any block of distances without building the `T x T` matrix. A
    subclass with weights creates them in `build`, which must accept being
    called with no shapes (`layer.build()`), so that `bias` can be used on a
    layer that was never called.

    Args:
        **kwargs: base layer arguments.

    Call arguments:
        query: `(batch, query_length, ...)`; only its length is used.
        key: optional, defaults to `query`; only its length is used.
        by_distance: return the bias once per distance instead of per
            (query, key) pair (see below); what attention layers take as
            `distance_bias`, so that windowed attention computes the bias of
            the blocks it needs only.

    Returns the bias, float32 under every dtype policy (`heads` as above):
    `(1, heads, query_length, key_length)` with `[0, h, i, j]` equal to
    `bias(i - j)[h]`; or, with `by_distance`, the
    `(1, heads, query_length + key_length - 1)` table whose entry `k` is the
    bias of distance `i - j = k - (key_length - 1)`.

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
        """The bias once per distance, float32 `(1, heads, query_length +
        key_length - 1)`: entry `k` is the bias of `i - j = k - (key_length -
        1)`, i.e. of the distances `-(key_length - 1) .. query_length - 1`.
        What attention layers take as `distance_bias` and gather at the
        distances of their queries and keys (`gather_distance_bias`), in the
        full pass and in a cached decoding step alike."""
        distance = ops.arange(1 - key_length, query_length, dtype="int32")
        return ops.cast(self.bias(distance), "float32")[None]


def per_head(values, distance):
    """Reshapes per-head `values` `(heads,)` to broadcast against `distance`:
    `(heads,) + (1,) * rank(distance)`."""
    return ops.reshape(values, (-1,) + (1,) * len(distance.shape))


def gather_distance_bias(distance_bias, distance, key_length):
    """Entries of a `by_distance` bias table at the distances `distance`.

    `distance_bias`: `(batch, heads, query_length + key_length - 1)` (entry
    `k` is the bias of `i - j = k - (key_length - 1)`); `distance`: an
    integer matrix of `i - j` values, `(rows, columns)`. Returns
    `(batch, heads, rows, columns)`; distances outside the table (which only
    masked keys can have) take its nearest entry.
    """
    index = ops.clip(distance + (key_length - 1), 0, ops.shape(distance_bias)[-1] - 1)
    return ops.take(distance_bias, index, axis=-1)


def add_distance_bias(attention_bias, distance_bias, distance, key_length):
    """`attention_bias` (or None) plus the `distance_bias` table gathered at
    the distances `distance` (see `gather_distance_bias`)."""
    pairs = gather_distance_bias(distance_bias, distance, key_length)
    return pairs if attention_bias is None else attention_bias + pairs
