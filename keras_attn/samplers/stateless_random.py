"""Stateless Gumbel noise from a `(2,)` int32 seed tensor, in `keras.ops`.

`keras.random` (Keras 3.15) does not take a seed *tensor* on TensorFlow or
torch (`draw_seed` accepts only an int or a `SeedGenerator`) and takes only
a uint32 key on JAX, so a seed that changes every step of a jit-compiled
loop cannot reach it. This module derives the random numbers from the seed
with an integer hash instead: plain int32 `keras.ops` arithmetic, which
wraps modulo 2**32 identically on every backend, so the same seed gives the
same noise (and the same tokens) on TensorFlow, JAX and torch, eagerly and
under `jax.jit` / `tf.function(jit_compile=True)`.
"""

from keras import ops

# The shifts and odd multipliers of Chris Wellons's "lowbias32" integer hash
# (hash-prospector, public domain), as the signed int32 with the same bits.
_MULTIPLIERS = (0x7FEB352D, 0x846CA68B - 2**32)
_SHIFTS = (16, 15, 16)
# Golden-ratio constant: seed (0, 0) does not start from the hash's fixed point 0.
_SEED_OFFSET = 0x9E3779B9 - 2**32
_MANTISSA_BITS = 23


def _int32(value):
    # From the Python int, not `np.int32(value)`: torch's compiler cannot
    # trace a numpy scalar into a tensor.
    return ops.convert_to_tensor(value, dtype="int32")


def _logical_right_shift(x, bits):
    # int32 `right_shift` is arithmetic (copies the sign bit); clear those bits.
    return ops.bitwise_and(ops.right_shift(x, bits), (1 << (32 - bits)) - 1)


def _mix(x):
    """A bijection of int32 bit patterns in which every input bit affects
    every output bit."""
    for shift, multiplier in zip(_SHIFTS, _MULTIPLIERS):
        x = ops.bitwise_xor(x, _logical_right_shift(x, shift))
        x = ops.multiply(x, _int32(multiplier))
    return ops.bitwise_xor(x, _logical_right_shift(x, _SHIFTS[-1]))


def gumbel_noise(shape, seed):
    """Independent standard Gumbel samples of `shape` `(rows, columns)`, a
    pure function of the int32 `seed` of shape `(2,)`.

    Uniforms are `(m + 0.5) / 2**23` for a 23-bit hash `m` of the element's
    position and the seed, so they lie strictly inside (0, 1) and the noise
    `-log(-log(u))` is finite, within about [-2.8, 16.6].
    """
    rows, columns = shape
    position = ops.add(
        ops.multiply(ops.expand_dims(ops.arange(rows, dtype="int32"), 1), columns),
        ops.expand_dims(ops.arange(columns, dtype="int32"), 0),
    )
    key = _mix(ops.bitwise_xor(seed[0], _mix(ops.bitwise_xor(seed[1], _int32(_SEED_OFFSET)))))
    bits = _mix(_mix(ops.bitwise_xor(position, key)))
    mantissa = ops.cast(_logical_right_shift(bits, 32 - _MANTISSA_BITS), "float32")
    uniform = ops.multiply(ops.add(mantissa, 0.5), 2.0**-_MANTISSA_BITS)
    return ops.negative(ops.log(ops.negative(ops.log(uniform))))
