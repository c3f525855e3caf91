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

    Returns the bias, `(1, heads, query_length, key_length)` (`heads` as
    above), float32 under every dtype policy, with `[0, h, i, j]` equal to
    `bias(i - j)[h]`.

    Example:

    >>> class Linear(RelativePositionBias):
    ...     def bias(self, distance):
    ...         return -ops.abs(ops.cast(distance, "float32"))[None]
    >>> Linear()(x).shape  # (1, 1, length, length)
    """

    def bias(self, distance):
        raise NotImplementedError(
            f"{type(self).__name__} must define `bias(distance)`, returning the "
            "float32 bias of shape (heads,) + distance.shape."
        )

    def build(self, query_shape=None, key_shape=None):
        # The built-in biases' weights do not depend on the input shapes.
        pass

    def call(self, query, key=None):
        key = query if key is None else key
        distance = masking.relative_positions(ops.shape(query)[1], ops.shape(key)[1])
        return ops.cast(self.bias(distance), "float32")[None]


def per_head(values, distance):
    """Reshapes per-head `values` `(heads,)` to broadcast against `distance`:
    `(heads,) + (1,) * rank(distance)`."""
    return ops.reshape(values, (-1,) + (1,) * len(distance.shape))
