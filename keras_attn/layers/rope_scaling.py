"""Scalings of RoPE's frequencies that stretch a trained model's context.

RoPE rotates the feature pair `m < d / 2` at position `n` by `n w_m`,
`w_m = base^(-2m / d)`. A model trained on `L` positions has seen the pair
`m` turn through at most `L w_m` radians; a scaling changes the `w_m` (and,
for YaRN, the scores' temperature) so that longer inputs stay in that range.
Every scaling is a dict with a `rope_type` and its parameters, with the
semantics, names and defaults of Hugging Face transformers' `rope_scaling` /
`rope_parameters`; `L` is `original_max_position_embeddings`:

- `linear` (`factor`): position interpolation (Chen et al., 2023,
  "Extending Context Window of Large Language Models via Positional
  Interpolation", https://arxiv.org/abs/2306.15595): `w_m / factor`, i.e.
  position `n` is read as `n / factor`.
- `ntk` (`factor`, `exponent` 1): NTK-aware scaling (bloc97, 2023,
  "NTK-Aware Scaled RoPE", reddit.com/r/LocalLLaMA): the base grows to
  `base * factor^(d / (d - 2))`, so the lowest frequency is interpolated by
  `factor` and the highest is kept: pair `m` is divided by
  `factor^(m / (d/2 - 1))`. With `exponent` `b != 1`, Su's NTK-mixed
  (2023, https://kexue.fm/archives/9706): pair `m` is divided by
  `factor^((m / (d/2 - 1))^b)`, the same two ends (the first pair kept,
  the last interpolated by `factor`) with the pairs in between interpolated
  less (`b > 1`) or more (`b < 1`) than NTK's straight line in log scale.
- `dynamic` (`factor`, `L`): NTK-aware scaling whose base follows the
  length `T` being encoded (emozilla's dynamic NTK):
  `base * (factor * T / L - (factor - 1))^(d / (d - 2))` once `T > L`,
  `base` while `T <= L`. `T` is one length per pass: a full pass's padded
  length, a decoding step's position plus one (`generate` encodes the
  longest prompt's own length first, then each row's own length). A
  Hugging Face config's `L` is its `max_position_embeddings` (an
  `original_max_position_embeddings` is ignored, with a warning).
- `yarn` (`factor`, `L`, `beta_fast` 32, `beta_slow` 1, `attention_factor`,
  `mscale`, `mscale_all_dim`, `truncate` True): YaRN (Peng et al., 2023,
  https://arxiv.org/abs/2309.00071). Pairs that turn more than `beta_fast`
  times over `L` positions keep `w_m`, pairs that turn less than
  `beta_slow` times get `w_m / factor`, and a linear ramp over the pair
  index blends the two in between (its ends floored and ceiled when
  `truncate`). The cosines and sines are multiplied by `attention_factor`,
  so the scores by its square; by default `0.1 ln(factor) + 1`, or
  `(0.1 mscale ln(factor) + 1) / (0.1 mscale_all_dim ln(factor) + 1)` when
  both `mscale` and `mscale_all_dim` are set (and 1 for `factor <= 1`).
  `factor` is read as given (transformers 5's reading; a Hugging Face
  config where `max_position_embeddings / L` differs warns).
- `llama3` (`factor`, `low_freq_factor`, `high_freq_factor`, `L`): Meta's
  Llama 3.1 scaling (https://github.com/meta-llama/llama-models): pairs
  whose wavelength `2 pi / w_m` is shorter than `L / high_freq_factor` keep
  `w_m`, those longer than `L / low_freq_factor` get `w_m / factor`, and in
  between `w_m ((1 - s) / factor + s)`, `s = (L / wavelength -
  low_freq_factor) / (high_freq_factor - low_freq_factor)`.

`rerope` (`window`) and `leaky_rerope` (`window`, `k`) change the scores
rather than the frequencies: they are `keras_attn.layers.ReRoPE`'s (see
`keras_attn.layers.rerope`), and `Rotary` and `RotaryEmbedding` refuse them.

`factor = 1` is plain RoPE for every type but `dynamic`, whose base still
grows by `(T / L)^(d / (d - 2))` past `L`.
"""

import math

from keras import ops

from keras_attn.layers.sinusoids import sinusoid_frequencies

# Each rope type's required parameters and its optional ones with their
# defaults (transformers' defaults).
ROPE_TYPES = {
    "linear": (("factor",), {}),
    "ntk": (("factor",), {"exponent": 1.0}),
    "dynamic": (("factor", "original_max_position_embeddings"), {}),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "attention_factor": None,
            "mscale": None,
            "mscale_all_dim": None,
            "truncate": True,
        },
    ),
    "llama3": (
        ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
        {},
    ),
    "longrope": (
        ("short_factor", "long_factor", "original_max_position_embeddings"),
        {"factor": None, "attention_factor": None},
    ),
    "rerope": (("window",), {}),
    "leaky_rerope": (("window", "k"), {}),
}

# The rope types that clip relative positions (scores, not frequencies).
CLIPPED_TYPES = ("rerope", "leaky_rerope")

# The rope types that need the length being encoded.
LENGTH_DEPENDENT = ("dynamic", "longrope")

# The rope types whose frequencies of every position change once the length
# exceeds `original_max_position_embeddings` (see `recompute_length`).
SWITCHED_TYPES = ("longrope",)

# Legacy spellings of rope types.
LEGACY_TYPES = {"su": "longrope"}

# Parameters that are lists of numbers, one per rotated pair.
_PER_PAIR = ("short_factor", "long_factor")

_POSITIVE = ("factor", "exponent", "original_max_position_embeddings", "beta_fast", "beta_slow",
             "attention_factor", "low_freq_factor", "high_freq_factor")


def standard_rope_scaling(scaling, original_max_position_embeddings=None):
    """`scaling` checked and in one spelling: a dict with `rope_type` (the
    legacy key `type` is read as it) and every parameter of its type, the
    optional ones at their defaults; None for None or `rope_type`
    `"default"` (plain RoPE). `original_max_position_embeddings`, when
    given, is the default of that parameter (a model's `max_position`, as
    transformers reads it). Raises a ValueError naming the key and the
    value of anything wrong."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise ValueError(
            f"A rope scaling must be a dict with a `rope_type`; received {scaling!r}."
        )
    scaling = dict(scaling)
    legacy = scaling.pop("type", None)
    rope_type = scaling.pop("rope_type", legacy)
    legacy, rope_type = (LEGACY_TYPES.get(name, name) for name in (legacy, rope_type))
    if legacy is not None and legacy != rope_type:
        raise ValueError(
            f"A rope scaling gives `rope_type={rope_type!r}` and `type={legacy!r}`; "
            "give one."
        )
    if rope_type == "default":
        if scaling:
            raise ValueError(
                "rope_type 'default' is plain RoPE and takes no parameters; received "
                + ", ".join(f"{key}={value!r}" for key, value in scaling.items()) + "."
            )
        return None
    if rope_type not in ROPE_TYPES:
        raise ValueError(
            f"Unknown `rope_type` {rope_type!r} in rope scaling; known types: "
            f"{sorted(ROPE_TYPES)} (or 'default', without parameters, for plain RoPE)."
        )
    required, optional = ROPE_TYPES[rope_type]
    # LongRoPE's `L` is where its factors switch: never a default.
    if ("original_max_position_embeddings" in required and original_max_position_embeddings
            and rope_type not in SWITCHED_TYPES):
        scaling.setdefault("original_max_position_embeddings", original_max_position_embeddings)
    unknown = sorted(set(scaling) - set(required) - set(optional))
    if unknown:
        raise ValueError(
            f"rope_type {rope_type!r} takes {list(required) + sorted(optional)}; "
            f"received unknown parameters {unknown} ("
            + ", ".join(f"{key}={scaling[key]!r}" for key in unknown) + ")."
        )
    missing = [key for key in required if scaling.get(key) is None]
    if missing:
        raise ValueError(
            f"rope_type {rope_type!r} needs {list(required)}; missing {missing}."
        )
    for key, value in scaling.items():
        if key == "window":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"rope_type {rope_type!r}: `window` must be a positive integer (a "
                    f"number of positions); received {value!r}."
                )
        elif key == "k":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                1 <= value < math.inf
            ):
                raise ValueError(
                    f"rope_type {rope_type!r}: `k` (the inverse slope past the window) "
                    f"must be a finite number >= 1; received {value!r}."
                )
        elif key in _PER_PAIR:
            if not isinstance(value, (list, tuple)) or not value or not all(
                not isinstance(x, bool) and isinstance(x, (int, float))
                and math.isfinite(x) and x > 0 for x in value
            ):
                raise ValueError(
                    f"rope_type {rope_type!r}: `{key}` must be a list of positive numbers, "
                    f"one per rotated feature pair; received {value!r}."
                )
            scaling[key] = [float(x) for x in value]
        elif key == "truncate":
            if not isinstance(value, bool):
                raise ValueError(
                    f"rope_type {rope_type!r}: `truncate` must be true or false; "
                    f"received {value!r}."
                )
        elif value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or (key in _POSITIVE and value <= 0)
        ):
            expected = "a positive number" if key in _POSITIVE else "a finite number"
            raise ValueError(
                f"rope_type {rope_type!r}: `{key}` must be {expected}; received {value!r}."
            )
    if rope_type == "llama3" and scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
        raise ValueError(
            "rope_type 'llama3': `high_freq_factor` must exceed `low_freq_factor`; "
            f"received high_freq_factor={scaling['high_freq_factor']!r}, "
            f"low_freq_factor={scaling['low_freq_factor']!r}."
        )
    if rope_type == "longrope" and len(scaling["short_factor"]) != len(scaling["long_factor"]):
        raise ValueError(
            "rope_type 'longrope': `short_factor` and `long_factor` must have one number per "
            f"rotated pair each; received {len(scaling['short_factor'])} and "
            f"{len(scaling['long_factor'])} numbers."
        )
    return {
        "rope_type": rope_type,
        **{key: scaling[key] for key in required},
        **{key: scaling.get(key, default) for key, default in optional.items()},
    }


def rotary_width_error(width, scaling=None):
    """Why RoPE under `scaling` (a dict of `standard_rope_scaling`'s form,
    or None) cannot rotate `width` query/key features, or None: an odd
    width (features rotate in pairs), or a width of 2 under `ntk` or
    `dynamic` (whose base grows to the power `d / (d - 2)`)."""
    if width % 2:
        return (
            "rotary positions rotate query/key features in pairs and need an even "
            "query/key width d"
        )
    rope_type = None if scaling is None else scaling["rope_type"]
    if rope_type in ("ntk", "dynamic") and width <= 2:
        return (
            f"rope_type {rope_type!r} raises the base to the power d / (d - 2) and "
            "needs a rotary width d > 2"
        )
    if rope_type == "longrope" and len(scaling["short_factor"]) != width // 2:
        return (
            "rope_type 'longrope' needs one `short_factor` and one `long_factor` per "
            f"rotated pair, d / 2 = {width // 2} each; received "
            f"short_factor={scaling['short_factor']!r}, long_factor={scaling['long_factor']!r}"
        )
    return None


def recompute_length(scaling):
    """The length `L` past which `scaling` (a dict of
    `standard_rope_scaling`'s form, or None) encodes every position anew
    (LongRoPE's long factors replace its short ones for the whole
    sequence), so that keys cached while the length was at most `L` no
    longer hold what a full pass computes; None for every other scaling."""
    if scaling is None or scaling["rope_type"] not in SWITCHED_TYPES:
        return None
    return int(scaling["original_max_position_embeddings"])


def scaled_frequencies(dim, base, scaling, length=None):
    """`(inverse_frequencies, attention_factor)` of RoPE on `dim` features
    with `base` under `scaling` (a dict of `standard_rope_scaling`'s form,
    or None for plain RoPE): float32 `(dim // 2,)` and a Python float that
    multiplies the cosines and sines. `length`, the number of positions
    being encoded (an int or a scalar tensor), is read by `dynamic` and
    `longrope` only; an int `(batch,)` tensor gives each row its own length
    and frequencies `(batch, dim // 2)`."""
    if scaling is None or scaling["rope_type"] in CLIPPED_TYPES:
        return sinusoid_frequencies(dim, base), 1.0
    error = rotary_width_error(dim, scaling)
    if error:
        raise ValueError(f"{error}; received d={dim}.")
    rope_type = scaling["rope_type"]
    if rope_type == "longrope":
        return _longrope(dim, base, scaling, length)
    factor = float(scaling["factor"])
    if rope_type == "linear":
        return sinusoid_frequencies(dim, base) / factor, 1.0
    if rope_type == "ntk":
        if scaling["exponent"] == 1:
            return sinusoid_frequencies(dim, base * factor ** (dim / (dim - 2))), 1.0
        pairs = ops.arange(dim // 2, dtype="float32") / (dim // 2 - 1)
        return sinusoid_frequencies(dim, base) / factor ** ops.power(pairs, scaling["exponent"]), 1.0
    if rope_type == "dynamic":
        if length is None:
            raise ValueError("rope_type 'dynamic' needs the length being encoded.")
        original = float(scaling["original_max_position_embeddings"])
        length = ops.maximum(ops.cast(length, "float32"), original)
        growth = ops.power(factor * length / original - (factor - 1.0), dim / (dim - 2))
        return sinusoid_frequencies(dim, base * growth), 1.0
    if rope_type == "yarn":
        return _yarn(dim, base, scaling, factor)
    return _llama3(dim, base, scaling, factor)


def _yarn(dim, base, scaling, factor):
    original = scaling["original_max_position_embeddings"]

    def pair_turning(turns):
        # The (fractional) pair `m` that turns `turns` times over `original`
        # positions: `original base^(-2m/d) / (2 pi) = turns` solved for `m`.
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_turning(scaling["beta_fast"]), pair_turning(scaling["beta_slow"])
    if scaling["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # a step rather than a ramp
    ramp = ops.clip((ops.arange(dim // 2, dtype="float32") - low) / (high - low), 0.0, 1.0)
    frequencies = sinusoid_frequencies(dim, base)
    # The ramp is 0 for the fast pairs (kept) and 1 for the slow (interpolated).
    frequencies = frequencies * (1.0 - ramp) + frequencies / factor * ramp
    attention_factor = scaling["attention_factor"]
    if attention_factor is None:
        mscale, mscale_all_dim = scaling["mscale"], scaling["mscale_all_dim"]
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    return frequencies, float(attention_factor)


def _yarn_mscale(factor, mscale=1.0):
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _llama3(dim, base, scaling, factor):
    original = scaling["original_max_position_embeddings"]
    low_freq_factor, high_freq_factor = scaling["low_freq_factor"], scaling["high_freq_factor"]
    frequencies = sinusoid_frequencies(dim, base)
    wavelengths = 2 * math.pi / frequencies
    smooth = (original / wavelengths - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = frequencies * ((1.0 - smooth) / factor + smooth)
    scaled = ops.where(wavelengths > original / low_freq_factor, frequencies / factor, smoothed)
    return ops.where(wavelengths < original / high_freq_factor, frequencies, scaled), 1.0


def _longrope(dim, base, scaling, length):
    if length is None:
        raise ValueError("rope_type 'longrope' needs the length being encoded.")
    original = scaling["original_max_position_embeddings"]
    # Plain tuples: a layer's scaling holds Keras' tracked lists, which
    # `torch.compile` cannot convert inside a graph (compiled blocks).
    short = ops.convert_to_tensor(tuple(scaling["short_factor"]), "float32")
    long = ops.convert_to_tensor(tuple(scaling["long_factor"]), "float32")
    # A select of the whole list, which XLA traces: one length per pass, or
    # one per row (`(batch, dim // 2)` factors).
    longer = ops.greater(ops.cast(length, "float32"), float(original))
    factors = ops.where(longer[..., None] if len(longer.shape) else longer, long, short)
    attention_factor, factor = scaling["attention_factor"], scaling["factor"]
    if attention_factor is None:
        attention_factor = 1.0
        if factor is not None and factor > 1:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original))
    return sinusoid_frequencies(dim, base) / factors, float(attention_factor)
