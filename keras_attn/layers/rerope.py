"""ReRoPE and Leaky ReRoPE scores: RoPE with relative positions clipped (or
slowed) past a window.

Su (2023), "Transformer upgrade road: 12, ReRoPE for infinite
extrapolation" (https://kexue.fm/archives/9708) and "13, reversing
Leaky ReRoPE" (https://kexue.fm/archives/9728). With `R(n)` RoPE's rotation by
`n` positions, the score of query `i` and key `j` is

    s_ij = q_i . R(f(i - j)) k_j,
    f(d) = d                                         for |d| < w,
    f(d) = sign(d) (w + (|d| - w) / k)               for |d| >= w,

`w` the window and `1 / k` the slope past it (`rerope`: `1 / k = 0`, the
position stays at `w`; `leaky_rerope`: `k >= 1`; `k = 1` is plain RoPE).
Inside the window every score is RoPE's; outside, no query ever sees a
relative position it was not trained on (`rerope`) or only slowly larger
ones (`leaky_rerope`).

`f` is not a difference of per-token positions, so the scores are not
`(R(i) q_i) . (R(j) k_j)` for any rotation of the queries and keys alone.
`R(a)^T R(b) = R(b - a)` still lets each region be one product of rotated
heads, with `a_i - b_j = f(i - j)` on it:

    near  (|d| < w):  a_i = i,                  b_j = j
    after (d >= w):   a_i = i / k + w (1 - 1/k), b_j = j / k
    before (d <= -w): a_i = i / k - w (1 - 1/k), b_j = j / k

so the scores are three matrix products and a selection by `d` (the cost:
about three times RoPE's score computation, measured in docs/speed.md).
A cache keeps keys unrotated and each step rotates them as above.
"""

import dataclasses

from keras import ops

from keras_attn.layers.rope_scaling import CLIPPED_TYPES


@dataclasses.dataclass(frozen=True)
class ClippedRotaryLogits:
    """`f(query, key, distance)`: the float32 `(batch, heads, query_length,
    key_length)` ReRoPE scores `q_i . R(f(i - j)) k_j` of unrotated heads
    `(batch, length, heads, key_size)`, `distance` the int
    `(query_length, key_length)` matrix of `i - j`.

    `rotary` is a `RotaryEmbedding` (its base; no scaling), `window` the `w`
    and `inverse_k` the `1 / k` of the module docstring.
    """

    rotary: object
    window: int
    inverse_k: float

    @classmethod
    def from_scaling(cls, rotary, scaling):
        """The scores of a `rerope`/`leaky_rerope` scaling (a dict of
        `standard_rope_scaling`'s form), or None for any other scaling."""
        if scaling is None or scaling["rope_type"] not in CLIPPED_TYPES:
            return None
        inverse_k = 1.0 / scaling["k"] if scaling["rope_type"] == "leaky_rerope" else 0.0
        return cls(rotary, int(scaling["window"]), inverse_k)

    def __call__(self, query, key, distance):
        # `distance = a_i - b_j` for the call's query and key positions;
        # `a_i - a_0 = d[i, 0] - d[0, 0]` and `b_j - b_0 = d[0, 0] - d[0, j]`,
        # and only differences matter: positions up to a shared constant.
        distance = ops.cast(distance, "float32")
        query_positions = distance[:, 0]
        key_positions = distance[0, 0] - distance[0, :]

        def scores(query_at, keys):
            rotated_query = self.rotary.rotate(query, query_at)
            return ops.cast(ops.einsum("btnh,bsnh->bnts", rotated_query, keys), "float32")

        near = scores(query_positions, self.rotary.rotate(key, key_positions))
        shift = self.window * (1.0 - self.inverse_k)
        # Past the window the keys sit at `j / k`: unrotated for ReRoPE.
        far_keys = key if not self.inverse_k else self.rotary.rotate(key, key_positions * self.inverse_k)
        after = scores(query_positions * self.inverse_k + shift, far_keys)
        before = scores(query_positions * self.inverse_k - shift, far_keys)
        return ops.where(
            distance >= self.window, after, ops.where(distance <= -self.window, before, near)
        )
