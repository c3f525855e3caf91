"""The sinusoid frequencies shared by every sinusoidal position scheme.

Vaswani et al. (2017, "Attention Is All You Need",
https://arxiv.org/abs/1706.03762) encode position `n` with the angles
`n * w_k`, `w_k = max_wavelength^(-2k / dim)`, one `(sin, cos)` pair per
`k < dim / 2`. `SinusoidalPositionEmbedding` tabulates them, `RotaryEmbedding`
rotates feature pairs by them and `SandwichBias` sums their cosines over a
distance; all three take the frequencies from `sinusoid_frequencies` (RoPE
through `rope_scaling`, which may rescale them), so the three schemes agree
on the frequencies by construction.
"""

from keras import ops


def check_even_width(layer, argument, width):
    """Raises a ValueError naming `layer` and `argument` when `width` is odd:
    sinusoids come in `(sin, cos)` pairs, so the width must be even."""
    if width % 2:
        raise ValueError(
            f"{type(layer).__name__}: {argument} must be even, since sinusoids come "
            f"in (sin, cos) pairs; received {width}."
        )


def sinusoid_frequencies(dim, max_wavelength=10000):
    """`max_wavelength^(-2k / dim)` for `k = 0 .. dim // 2 - 1`, float32,
    shape `(dim // 2,)`: the highest frequency (1) first. A `(batch,)`
    tensor `max_wavelength` (a base per row) gives `(batch, dim // 2)`."""
    pairs = ops.arange(dim // 2, dtype="float32")
    base = ops.cast(max_wavelength, "float32")
    if len(base.shape):
        base = base[:, None]
    return ops.power(base, -2.0 * pairs / dim)


def sinusoid_angles(positions, dim, max_wavelength=10000):
    """`positions[..., None] * sinusoid_frequencies(dim, max_wavelength)`.

    `positions` is a tensor of any shape (positions, or signed distances),
    cast to float32; the result has shape `positions.shape + (dim // 2,)`.
    """
    positions = ops.cast(positions, "float32")
    return positions[..., None] * sinusoid_frequencies(dim, max_wavelength)
