"""Independent numpy implementations the layers are checked against.

Written from the papers' formulas, sharing no code with keras_attn.
"""

import numpy as np

from tests.harness import to_numpy


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def dense(x, layer):
    out = x @ to_numpy(layer.kernel).astype(np.float64)
    if layer.bias is not None:
        out = out + to_numpy(layer.bias).astype(np.float64)
    return out


def attention(
    layer,
    query,
    value=None,
    key=None,
    attention_mask=None,
    attention_bias=None,
    use_causal_mask=False,
    pre_softmax=None,
    post_softmax=None,
    rotate=None,
    query_scale=None,
    pair_logits=None,
):
    """Multi-head (optionally talking-heads) attention in float64 numpy.

    `attention_mask` is boolean `(batch, query_length, key_length)`; masked
    entries get probability 0, and a row with no key left gets all zeros.
    `pre_softmax` `(h_k, h)` / `post_softmax` `(h, h_v)` are talking-heads
    mixing matrices. `rotate(q, k)` transforms the projected queries and keys
    (rotary encodings); `query_scale` `(batch, query_length)` multiplies the
    scores of each query row (log-n scaling); `pair_logits(q, k)` computes
    the `(batch, heads, query, key)` products instead of `q . k` (ReRoPE).
    """
    value = query if value is None else value
    key = value if key is None else key
    query, value, key = (np.asarray(t, np.float64) for t in (query, value, key))
    batch, query_length, _ = query.shape
    key_length = key.shape[1]
    key_size, head_size = layer.key_size, layer.head_size
    q = dense(query, layer.query_dense).reshape(batch, query_length, -1, key_size)
    k = dense(key, layer.key_dense).reshape(batch, key_length, -1, key_size)
    v = dense(value, layer.value_dense).reshape(batch, key_length, -1, head_size)
    if rotate is not None:
        q, k = rotate(q, k)

    logits = np.einsum("bqhd,bkhd->bhqk", q, k) if pair_logits is None else pair_logits(q, k)
    if query_scale is not None:
        logits = logits * np.asarray(query_scale, np.float64)[:, None, :, None]
    if layer.attention_scale:
        logits = logits / np.sqrt(key_size)
    if pre_softmax is not None:
        logits = np.einsum("bhqk,hm->bmqk", logits, pre_softmax)
    if attention_bias is not None:
        logits = logits + attention_bias

    keep = np.ones((batch, 1, query_length, key_length), bool)
    if attention_mask is not None:
        keep = keep & np.asarray(attention_mask, bool)[:, None]
    if use_causal_mask:
        keep = keep & np.tril(np.ones((query_length, key_length), bool))
    keep = np.broadcast_to(keep, logits.shape)
    probabilities = np.zeros_like(logits)
    for index in np.ndindex(*logits.shape[:3]):
        row_keep = keep[index]
        if row_keep.any():
            probabilities[index][row_keep] = softmax(logits[index][row_keep])
    if post_softmax is not None:
        probabilities = np.einsum("bmqk,mv->bvqk", probabilities, post_softmax)

    attended = np.einsum("bhqk,bkhd->bqhd", probabilities, v)
    attended = attended.reshape(batch, query_length, -1)
    return dense(attended, layer.output_dense), probabilities


def rope(x, base=10000.0, scale_base=None, sign=1.0, centre=0, frequencies=None,
         attention_factor=1.0, positions=None):
    """RoPE on adjacent feature pairs, `x` `(batch, length, heads, size)`,
    written from the RoFormer paper; with `scale_base`, XPOS's scaling.
    `frequencies` (`(size // 2,)`, default `base^(-2m / size)`) and
    `attention_factor` (on cos and sin) are a rope scaling's, from
    `rope_scaling_frequencies`; `positions` default to `0 .. length - 1`."""
    batch, length, heads, size = x.shape
    if positions is None:
        positions = np.arange(length)
    positions = np.asarray(positions, dtype=np.float64)
    out = np.empty_like(x, dtype=np.float64)
    for m in range(size // 2):
        theta = base ** (-2.0 * m / size) if frequencies is None else frequencies[m]
        cos = attention_factor * np.cos(positions * theta)
        sin = attention_factor * np.sin(positions * theta)
        even, odd = x[..., 2 * m], x[..., 2 * m + 1]
        factor = 1.0
        if scale_base is not None:
            zeta = (2.0 * m / size + 0.4) / 1.4
            factor = (zeta ** (sign * (positions - centre) / scale_base))[None, :, None]
        out[..., 2 * m] = (even * cos[None, :, None] - odd * sin[None, :, None]) * factor
        out[..., 2 * m + 1] = (odd * cos[None, :, None] + even * sin[None, :, None]) * factor
    return out


def rope_scaling_frequencies(size, base, scaling, length=None):
    """`(frequencies, attention_factor)` of RoPE on `size` features under a
    Hugging Face style rope scaling dict, in float64, pair by pair from the
    papers' formulas (position interpolation, NTK-aware, dynamic NTK, YaRN,
    Llama 3.1, LongRoPE)."""
    rope_type, factor = scaling["rope_type"], scaling.get("factor")
    original = scaling.get("original_max_position_embeddings")
    plain = np.array([base ** (-2.0 * m / size) for m in range(size // 2)])
    if rope_type == "longrope":
        # Phi-3's: the long factors for a length past the original one.
        factors = scaling["long_factor"] if length > original else scaling["short_factor"]
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None:
            attention_factor = 1.0 if not factor or factor <= 1 else np.sqrt(
                1 + np.log(factor) / np.log(original)
            )
        return plain / np.array(factors, "float64"), attention_factor
    if rope_type == "linear":
        return plain / factor, 1.0
    if rope_type in ("ntk", "dynamic"):
        growth = factor
        if rope_type == "dynamic":
            growth = factor * max(length, original) / original - (factor - 1)
        exponent = scaling.get("exponent", 1.0)
        if exponent != 1.0:  # NTK-mixed: pair m divided by factor^((m / (d/2 - 1))^b)
            return np.array([
                plain[m] / factor ** ((m / (size // 2 - 1)) ** exponent) for m in range(size // 2)
            ]), 1.0
        new_base = base * growth ** (size / (size - 2))
        return np.array([new_base ** (-2.0 * m / size) for m in range(size // 2)]), 1.0
    if rope_type == "llama3":
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        out = []
        for w in plain:
            wavelength = 2 * np.pi / w
            if wavelength < original / high:
                out.append(w)
            elif wavelength > original / low:
                out.append(w / factor)
            else:
                s = (original / wavelength - low) / (high - low)
                out.append((1 - s) * w / factor + s * w)
        return np.array(out), 1.0
    assert rope_type == "yarn"
    beta_fast, beta_slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)

    def pair_of(turns):  # the pair m turning `turns` times over `original` positions
        return size * np.log(original / (2 * np.pi * turns)) / (2 * np.log(base))

    start, end = pair_of(beta_fast), pair_of(beta_slow)
    if scaling.get("truncate", True):
        start, end = np.floor(start), np.ceil(end)
    start, end = max(start, 0), min(end, size - 1)
    end = end + 0.001 if start == end else end
    out = []
    for m, w in enumerate(plain):
        interpolated = min(max((m - start) / (end - start), 0.0), 1.0)
        out.append(w * (1 - interpolated) + w / factor * interpolated)

    def mscale(scale):
        return 1.0 if factor <= 1 else 0.1 * scale * np.log(factor) + 1.0

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        if scaling.get("mscale") and scaling.get("mscale_all_dim"):
            attention_factor = mscale(scaling["mscale"]) / mscale(scaling["mscale_all_dim"])
        else:
            attention_factor = mscale(1.0)
    return np.array(out), attention_factor


def rerope_logits(q, k, window, slope=0.0, base=10000.0):
    """ReRoPE (`slope` 0) and Leaky ReRoPE (`slope` `1 / k`) products
    `(batch, heads, query, key)` of unrotated `q`, `k`, pair by pair: the
    query rotated by the clipped relative position `f(i - j)` (`i - j`
    inside the window, `sign (window + (|i - j| - window) slope)` outside)
    dotted with the unrotated key, as Su's definition reads."""
    batch, query_length, heads, _ = q.shape
    logits = np.empty((batch, heads, query_length, k.shape[1]))
    for i in range(query_length):
        for j in range(k.shape[1]):
            d = i - j
            if abs(d) >= window:
                d = np.sign(d) * (window + (abs(d) - window) * slope)
            rotated = rope(q[:, i : i + 1], base=base, positions=[d])[:, 0]
            logits[:, :, i, j] = np.einsum("bhd,bhd->bh", rotated, k[:, j])
    return logits


def band(query_length, key_length, window, causal, blockwise=False):
    """The documented local-window band of `LocalMaskBaseline` /
    `attention_window`, boolean `(query_length, key_length)`, by loops."""
    mask = np.zeros((query_length, key_length), bool)
    for i in range(query_length):
        for j in range(key_length):
            if blockwise:
                mask[i, j] = j <= i and j // window >= i // window - 1
            elif causal:
                mask[i, j] = i - window < j <= i
            else:
                mask[i, j] = abs(i - j) <= window // 2
    return mask


def sinusoidal_positions(length, dim, base=10000.0):
    """Vaswani et al.'s table, `(length, dim)`: `P(n, 2k) = sin(n / base^(2k/dim))`,
    `P(n, 2k+1) = cos(...)`, by loops."""
    table = np.zeros((length, dim))
    for n in range(length):
        for k in range(dim // 2):
            angle = n / base ** (2.0 * k / dim)
            table[n, 2 * k], table[n, 2 * k + 1] = np.sin(angle), np.cos(angle)
    return table


def alibi_bias(slopes, query_length, key_length, causal):
    """ALiBi's `(1, heads, q, k)` bias: `m_h (j - i)` causal, `-m_h |i - j|`
    symmetric."""
    i, j = np.indices((query_length, key_length))
    distance = (j - i) if causal else -np.abs(i - j)
    return np.asarray(slopes, np.float64)[None, :, None, None] * distance[None, None]


def kerple_bias(r1_variable, r2_variable, form, query_length, key_length):
    """KERPLE's `(1, heads, q, k)` bias from the stored variables:
    `r1 = softplus(a)`, `r2 = softplus(b)` (log) or `2 sigmoid(b)` (power)."""
    a, b = (np.asarray(v, np.float64) for v in (r1_variable, r2_variable))
    r1 = np.log1p(np.exp(a))[:, None, None]
    if form == "log":
        r2 = np.log1p(np.exp(b))[:, None, None]
    else:
        r2 = (2.0 / (1.0 + np.exp(-b)))[:, None, None]
    i, j = np.indices((query_length, key_length))
    distance = np.abs(i - j)[None].astype(np.float64)
    if form == "log":
        return (-r1 * np.log(1.0 + r2 * distance))[None]
    return (-r1 * distance**r2)[None]


def sandwich_bias(dim, scale, query_length, key_length):
    """Sandwich's `(1, 1, q, k)` bias: `scale * p_i . p_j` with `p` the
    sinusoidal positions, computed as the inner product itself."""
    length = max(query_length, key_length)
    table = sinusoidal_positions(length, dim)
    return (scale * table[:query_length] @ table[:key_length].T)[None, None]


def functional_relative_embeddings(query_length, key_length, max_relative_position, width,
                                   query_positions=None, key_positions=None):
    """NEZHA's `a_ij`, `(query_length, key_length, width)`, by loops: the
    sinusoid of the table row `r = clip(j - i, -K, K) + K` (the released
    code's convention; the paper writes the sinusoid of `j - i`), interleaved
    `(sin, cos)` pairs at frequencies `10000^(-2m/width)`."""
    query_positions = range(query_length) if query_positions is None else query_positions
    key_positions = range(key_length) if key_positions is None else key_positions
    out = np.zeros((query_length, key_length, width))
    for a, i in enumerate(query_positions):
        for b, j in enumerate(key_positions):
            row = min(max(j - i, -max_relative_position), max_relative_position)
            row += max_relative_position
            for m in range(width // 2):
                angle = row / 10000.0 ** (2.0 * m / width)
                out[a, b, 2 * m], out[a, b, 2 * m + 1] = np.sin(angle), np.cos(angle)
    return out


def nezha_attention(q, k, v, keep, max_relative_position):
    """NEZHA's attention on projected heads `(batch, length, heads, size)`,
    float64: `e_ij = q_i . (k_j + a_ij) / sqrt(d)`, `p = softmax_j(e)` over
    the keys `keep` `(batch, query_length, key_length)` keeps (a row with
    none gets zeros), `o_i = sum_j p_ij (v_j + a_ij)`. Returns
    `(batch, query_length, heads, size_v)`."""
    batch, query_length, heads, key_size = q.shape
    key_length, head_size = k.shape[1], v.shape[-1]
    key_table = functional_relative_embeddings(
        query_length, key_length, max_relative_position, key_size
    )
    value_table = functional_relative_embeddings(
        query_length, key_length, max_relative_position, head_size
    )
    out = np.zeros((batch, query_length, heads, head_size))
    for b in range(batch):
        for n in range(heads):
            for i in range(query_length):
                visible = np.flatnonzero(keep[b, i])
                if len(visible) == 0:
                    continue
                scores = np.array(
                    [q[b, i, n] @ (k[b, j, n] + key_table[i, j]) for j in visible]
                ) / np.sqrt(key_size)
                p = softmax(scores)
                out[b, i, n] = sum(
                    p_j * (v[b, j, n] + value_table[i, j]) for p_j, j in zip(p, visible)
                )
    return out
