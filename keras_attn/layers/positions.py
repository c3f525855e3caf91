"""Position encodings of an attention layer, as small objects with one
interface.

`MultiHeadAttention(position=...)` takes one of them (or None): `Rotary`
(RoPE), `XPos` (RoPE with XPOS's decay), `ReRoPE` (RoPE with clipped
relative positions) or `FunctionalRelative` (NEZHA). Each checks its
arguments when constructed; the attention then calls, for every pass:

- `check_widths(key_size, head_size)` once, when the layer is made;
- `rotate(query, key, value, query_positions, key_positions, tables)` on
  the new heads, before a cache stores them;
- `decay(query, key, query_positions, key_positions, cached)` on the heads
  the kernel reads (XPOS's decay, relative to the newest query when cached);
- `kernel_arguments()`: what the kernel (`DotProductAttention`) adds to the
  scores itself (NEZHA's table, ReRoPE's clipped scores).

A rotation's tables (RoPE's cosines and sines, `tables(positions,
key_size, head_size)`) depend on the positions alone: a model computes
them once per pass for each distinct position object and widths
(`shared_tables`; in its graph, a `RotaryTables` node) and gives every
block its own, as transformers hands its layers `position_embeddings`.

Additive biases by distance (ALiBi, KERPLE, Sandwich, T5's buckets) are not
position objects: a model computes them once and gives every block its
`distance_bias`.
"""

import functools
import warnings

import keras
from keras import ops

from keras_attn.layers.functional_relative_position import FunctionalRelativePosition
from keras_attn.layers.functional_relative_position import check_max_relative_position
from keras_attn.layers.rerope import ClippedRotaryLogits
from keras_attn.layers.rope_scaling import CLIPPED_TYPES
from keras_attn.layers.rope_scaling import rotary_width_error
from keras_attn.layers.rope_scaling import standard_rope_scaling
from keras_attn.layers.rotary_embedding import ROTARY_LAYOUTS
from keras_attn.layers.rotary_embedding import RotaryEmbedding

# The names `make_position` reads (a variant's `position_encoding`).
POSITION_ENCODINGS = (None, "rotary", "xpos", "functional_relative")
ROTARY_ENCODINGS = ("rotary", "xpos")

# `MultiHeadAttention`'s former position arguments, by `make_position`'s names.
LEGACY_ARGUMENTS = {
    "position_encoding": "encoding",
    "rotary_layout": "layout",
    "rotary_max_wavelength": "base",
    "rotary_scaling": "scaling",
    "rotary_value": "rotate_values",
    "xpos_scale_base": "xpos_scale_base",
    "max_relative_position": "max_relative_position",
}


class Position:
    """No position encoding: the interface, every method the identity."""

    # Whether the attention must be called with `use_causal_mask=True`.
    causal_only = False
    # The name of `POSITION_ENCODINGS` this object encodes.
    encoding = None
    # Whether the kernel reads the distances `i - j` (`kernel_arguments`).
    reads_distances = False
    # Whether `rotate` reads `tables` (else `tables` gives None).
    has_tables = False
    # Whether a query's and a key's positions are compared (the kernel's
    # distances, XPOS's decay), not only each token's own: a pass packing
    # several sequences in one row cannot give those per sequence.
    compares_positions = False

    def check_widths(self, key_size, head_size):
        """Raises a ValueError unless heads of these widths can be encoded
        (`key_size` as given: None means `head_size`)."""

    def rotate(self, query, key, value, query_positions, key_positions, tables=None):
        """The heads `(batch, length, heads, size)` of new tokens at their
        integer positions, encoded before a cache stores them; `tables`:
        None, or `tables(positions, ...)` of positions that the queries and
        the keys share, for the same result."""
        return query, key, value

    def tables(self, positions, key_size, head_size, lengths=None):
        """What `rotate` reads of the integer `positions` (`(length,)`, or
        `(batch, length)` for positions of each row) for heads of these
        widths, or None: computed once, they serve every layer of an equal
        position object and widths. `lengths`: None, or int `(batch,)`, the
        length each row encodes (read by a rope scaling that reads it)."""
        return None

    def decay(self, query, key, query_positions, key_positions, cached=False):
        """The heads the kernel reads, after the cache."""
        return query, key

    def kernel_arguments(self):
        """The `DotProductAttention` arguments this encoding sets."""
        return {}

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.get_config().items())
        return f"{type(self).__name__}({arguments})"


def _check_layout(layout):
    if layout not in ROTARY_LAYOUTS:
        raise ValueError(f"`layout` must be one of {ROTARY_LAYOUTS}; received {layout!r}.")


def _check_positive(argument, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"`{argument}` must be a positive number; received {value!r}.")


def _check_rotary_width(position, key_size, head_size):
    error = rotary_width_error(key_size or head_size, position._scaling)
    if error:
        given = f"key_size={key_size}" if key_size else f"key_size=None, so head_size={head_size}"
        raise ValueError(f"MultiHeadAttention(position={position!r}): {error}; received {given}.")


@keras.saving.register_keras_serializable(package="keras_attn")
class Rotary(Position):
    """RoPE on queries and keys (and, with `rotate_values`, values): see
    `keras_attn.layers.RotaryEmbedding` for the rotation, the layouts and
    the scalings.

    Args:
        base: RoPE's base (`rope_theta`, 10000 in the paper).
        scaling: None, or a rope scaling dict with the names and defaults of
            Hugging Face's `rope_scaling` (`{"rope_type": "yarn", "factor":
            4.0, "original_max_position_embeddings": 2048}`); `rerope` and
            `leaky_rerope` are `ReRoPE`'s, not a rotation.
        layout: `"interleaved"` (features `2m, 2m + 1`, RoFormer's) or
            `"half"` (`m, m + d/2`, LLaMA's `rotate_half`).
        rotate_values: also rotate the values by their positions (Hugging
            Face RoFormer's `rotary_value`): head output
            `sum_j a_ij R_j v_j`.

    Raises:
        ValueError: naming the argument and the value received.

    Example:

    >>> layer = keras_attn.MultiHeadAttention(
    ...     heads=2, head_size=8, position=keras_attn.layers.Rotary(layout="half"))
    >>> layer(np.zeros((1, 5, 16), "float32")).shape
    (1, 5, 16)
    """

    encoding = "rotary"
    has_tables = True

    def __init__(self, base=10000, scaling=None, layout="interleaved", rotate_values=False):
        _check_positive("base", base)
        _check_layout(layout)
        if not isinstance(rotate_values, bool):
            raise ValueError(f"`rotate_values` must be True or False; received {rotate_values!r}.")
        self._scaling = standard_rope_scaling(scaling)
        if self._scaling is not None and self._scaling["rope_type"] in CLIPPED_TYPES:
            raise ValueError(
                f"rope_type {self._scaling['rope_type']!r} clips relative positions in the "
                "scores, which no rotation of the queries and keys alone gives; use "
                "`keras_attn.layers.ReRoPE`; received scaling={scaling!r}."
            )
        self.base, self.scaling, self.layout = base, scaling, layout
        self.rotate_values = rotate_values
        self.embedding = RotaryEmbedding(base, scaling=scaling, layout=layout)

    def check_widths(self, key_size, head_size):
        _check_rotary_width(self, key_size, head_size)
        if self.rotate_values and head_size % 2:
            raise ValueError(
                f"{self!r}: `rotate_values=True` rotates value features in pairs and needs "
                f"an even `head_size`; received head_size={head_size}."
            )

    def rotate(self, query, key, value, query_positions, key_positions, tables=None):
        key_tables = value_tables = None
        if tables is not None:
            key_tables = (tables["cos"], tables["sin"])
            if self.rotate_values:
                value_tables = (tables["value_cos"], tables["value_sin"])
        query, key = self.embedding.rotate_pair(
            query, key, query_positions, key_positions, key_tables
        )
        if self.rotate_values:
            value = self.embedding.rotate(value, key_positions, values=True, tables=value_tables)
        return query, key, value

    def tables(self, positions, key_size, head_size, lengths=None):
        """`{"cos", "sin"}` of the queries and keys (`RotaryEmbedding.tables`
        of width `key_size`; with `rotate_values`, also `"value_cos"` and
        `"value_sin"` of width `head_size`, without YaRN's attention
        factor), float32."""
        cos, sin = self.embedding.tables(positions, key_size, lengths)
        tables = {"cos": cos, "sin": sin}
        if self.rotate_values:
            tables["value_cos"], tables["value_sin"] = self.embedding.tables(
                positions, head_size, lengths, values=True
            )
        return tables

    def decay(self, query, key, query_positions, key_positions, cached=False):
        return self.embedding.decay_pair(query, key, query_positions, key_positions, cached)

    def get_config(self):
        return {"base": self.base, "scaling": self.scaling, "layout": self.layout,
                "rotate_values": self.rotate_values}


@keras.saving.register_keras_serializable(package="keras_attn")
class XPos(Rotary):
    """XPOS (Sun et al., 2023, "A Length-Extrapolatable Transformer",
    https://arxiv.org/abs/2212.10554): RoPE whose pair `m` at position `n` is
    also scaled by `zeta_m^(+-n / scale_base)` (queries `+`, keys `-`), so
    scores decay with `i - j`; see `keras_attn.layers.RotaryEmbedding`. For
    causal attention only: a call without `use_causal_mask=True` is a
    ValueError.

    Args:
        base, scaling, layout: as `Rotary`'s.
        scale_base: XPOS's scale base (512 in the paper), a positive number.
    """

    causal_only = True
    encoding = "xpos"
    compares_positions = True

    def __init__(self, base=10000, scale_base=512, scaling=None, layout="interleaved"):
        super().__init__(base, scaling, layout)
        _check_positive("scale_base", scale_base)
        self.scale_base = scale_base
        self.embedding = RotaryEmbedding(base, scale_base, scaling=scaling, layout=layout)

    def get_config(self):
        return {"base": self.base, "scale_base": self.scale_base, "scaling": self.scaling,
                "layout": self.layout}


def check_tables(layer, query_length, key_length):
    """Refuses `rotary_tables` given to the attention `layer` that it cannot
    read: its position object has none, or its queries and keys differ in
    length (one table of positions serves both)."""
    if not layer._position.has_tables:
        raise ValueError(
            f"{layer.name}: `rotary_tables` are a rotary position object's "
            f"(Rotary, XPos); this layer has position={layer.position!r}."
        )
    if None not in (query_length, key_length) and query_length != key_length:
        raise ValueError(
            f"{layer.name}: `rotary_tables` hold the positions that the queries and the "
            f"keys share; received {query_length} queries and {key_length} keys."
        )


@keras.saving.register_keras_serializable(package="keras_attn")
class RotaryTables(keras.Operation):
    """The `tables` of `position` for the positions `0 .. length - 1` of a
    `(batch, length, ...)` `sequence`: a node of a functional model's graph
    whose output every block of that position object and widths reads
    (`Transformer.rotary_tables`), so that a graph runner (the torch
    runtime's `DirectGraph`, `CompiledBlocks`) sees one input shared by the
    blocks. An operation, not a layer: the model's layers, and so its
    weights and names, are unchanged.

    Args:
        position: a position object with tables (`Rotary`, `XPos`).
        key_size, head_size: the attention's widths.
        name: the node's name.

    Call arguments:
        sequence: `(batch, length, ...)`, of which only the length is read.

    Example:

    >>> tables = RotaryTables(Rotary(layout="half"), 8, 8)(np.zeros((1, 5), "int32"))
    >>> sorted(tables), tuple(tables["cos"].shape)
    (['cos', 'sin'], (1, 5, 1, 4))
    """

    def __init__(self, position, key_size, head_size, name=None):
        super().__init__(name=name)
        if isinstance(position, dict):
            position = keras.saving.deserialize_keras_object(position)
        if not getattr(position, "has_tables", False):
            raise ValueError(
                "RotaryTables computes the tables of a rotary position object (Rotary, "
                f"XPos); received position={position!r}."
            )
        self.position, self.key_size, self.head_size = position, key_size, head_size

    def call(self, sequence):
        positions = ops.arange(ops.shape(sequence)[1], dtype="int32")
        return self.position.tables(positions, self.key_size, self.head_size)

    def get_config(self):
        return {
            "position": keras.saving.serialize_keras_object(self.position),
            "key_size": self.key_size,
            "head_size": self.head_size,
            "name": self.name,
        }


def shared_tables(attentions, compute):
    """`compute(attention)` for each of `attentions` (attention layers with
    a `position`) that has tables, called once per distinct position object
    (by equality: Gemma 3's local and global bases are two) and widths:
    the list, None for each attention without tables or computing in
    another dtype than float32 (Keras casts a layer's floating call
    arguments to its compute dtype, which would round the tables; such a
    layer computes its own, in float32, as with None)."""
    computed, tables = {}, []
    for attention in attentions:
        position = getattr(attention, "position", None)
        if not getattr(position, "has_tables", False) or attention.compute_dtype != "float32":
            tables.append(None)
            continue
        key = (position, attention.key_size, attention.head_size)
        if key not in computed:
            computed[key] = compute(attention)
        tables.append(computed[key])
    return tables


@keras.saving.register_keras_serializable(package="keras_attn")
class ReRoPE(Position):
    """ReRoPE and Leaky ReRoPE (Su, 2023): RoPE scores with the relative
    position `i - j` clipped at `window` (or, with `k`, growing by `1 / k`
    past it); see `keras_attn.layers.rerope`.

    Not a `Rotary` scaling: no rotation of the queries and keys gives these
    scores, so the cache keeps keys unrotated and the kernel computes the
    scores on its einsum path.
    Args:
        window: `w`, a positive integer.
        k: None for ReRoPE (positions stay at `w`), or Leaky ReRoPE's `k >= 1`.
        base, layout: RoPE's, as `Rotary`'s.
    """

    encoding = "rotary"
    reads_distances = True
    compares_positions = True

    def __init__(self, window, k=None, base=10000, layout="interleaved"):
        _check_positive("base", base)
        _check_layout(layout)
        scaling = {"rope_type": "rerope", "window": window}
        if k is not None:
            scaling = {"rope_type": "leaky_rerope", "window": window, "k": k}
        self._scaling = standard_rope_scaling(scaling)
        self.window, self.k, self.base, self.layout = window, k, base, layout
        self.logits = ClippedRotaryLogits.from_scaling(
            RotaryEmbedding(base, layout=layout), self._scaling
        )

    @classmethod
    def from_scaling(cls, scaling, base=10000, layout="interleaved"):
        """The ReRoPE of a `rerope`/`leaky_rerope` rope scaling dict."""
        scaling = standard_rope_scaling(scaling)
        return cls(scaling["window"], scaling.get("k"), base=base, layout=layout)

    def check_widths(self, key_size, head_size):
        _check_rotary_width(self, key_size, head_size)

    def kernel_arguments(self):
        return {"position_logits": self.logits}

    def get_config(self):
        return {"window": self.window, "k": self.k, "base": self.base, "layout": self.layout}


@keras.saving.register_keras_serializable(package="keras_attn")
class FunctionalRelative(Position):
    """NEZHA's functional relative positions: fixed sinusoids of the clipped
    distance added to the keys and the values, by the kernel's einsum path;
    see `keras_attn.layers.FunctionalRelativePosition`.

    Args:
        max_relative_position: the distance where the table clips (NEZHA's
            64), a positive integer.
    """

    encoding = "functional_relative"
    reads_distances = True
    compares_positions = True

    def __init__(self, max_relative_position=64):
        check_max_relative_position(max_relative_position)
        self.max_relative_position = max_relative_position
        self.table = FunctionalRelativePosition(max_relative_position, name="relative_position")

    def kernel_arguments(self):
        return {"relative_position": self.table}

    def get_config(self):
        return {"max_relative_position": self.max_relative_position}


def make_position(encoding=None, layout="interleaved", base=10000, scaling=None,
                  rotate_values=False, xpos_scale_base=512, max_relative_position=64):
    """The position object of an encoding name (`POSITION_ENCODINGS`, a
    variant's `position_encoding`) and its options, or None: `"rotary"`
    with a `rerope`/`leaky_rerope` scaling is a `ReRoPE`. Options that the
    encoding does not read must keep their defaults."""
    _check_layout(layout)
    if encoding not in POSITION_ENCODINGS:
        raise ValueError(
            f"`position_encoding` must be one of {POSITION_ENCODINGS}; received {encoding!r}."
        )
    if rotate_values and encoding != "rotary":
        raise ValueError(
            "`rotary_value=True` rotates the values as RoPE rotates the keys and needs "
            f"position_encoding='rotary'; received position_encoding={encoding!r}."
        )
    if scaling is not None and encoding not in ROTARY_ENCODINGS:
        raise ValueError(
            "`rotary_scaling` rescales the frequencies of rotary positions and needs "
            f"position_encoding in {ROTARY_ENCODINGS}; received position_encoding={encoding!r}."
        )
    check_max_relative_position(max_relative_position)
    standard = standard_rope_scaling(scaling)
    if standard is not None and standard["rope_type"] in CLIPPED_TYPES:
        if encoding != "rotary" or rotate_values:
            raise ValueError(
                f"rope_type {standard['rope_type']!r} clips the relative positions of "
                "rotary scores and needs position_encoding='rotary' without `rotary_value`; "
                f"received position_encoding={encoding!r}, rotary_value={rotate_values!r}."
            )
        return ReRoPE.from_scaling(standard, base=base, layout=layout)
    if encoding == "rotary":
        return Rotary(base, scaling, layout, rotate_values)
    if encoding == "xpos":
        return XPos(base, xpos_scale_base, scaling, layout)
    if encoding == "functional_relative":
        return FunctionalRelative(max_relative_position)
    return None


def legacy_arguments(position):
    """`MultiHeadAttention`'s former position arguments that give
    `position` (a position object or None), by their names."""
    position = position or Position()
    scaling = getattr(position, "scaling", None)
    if isinstance(position, ReRoPE):
        scaling = dict(position._scaling)
    return {
        "position_encoding": position.encoding,
        "rotary_layout": getattr(position, "layout", "interleaved"),
        "rotary_max_wavelength": getattr(position, "base", 10000),
        "rotary_scaling": scaling,
        "rotary_value": getattr(position, "rotate_values", False),
        "xpos_scale_base": getattr(position, "scale_base", 512),
        "max_relative_position": getattr(position, "max_relative_position", 64),
    }


def position_from_legacy(arguments):
    """The position object of `MultiHeadAttention`'s former arguments
    (`LEGACY_ARGUMENTS`, a dict of those given), or None."""
    return make_position(**{LEGACY_ARGUMENTS[name]: value for name, value in arguments.items()})


def position_argument(position, legacy):
    """`MultiHeadAttention`'s `position`, from the object (or its
    serialised dict) or from the former arguments `legacy` (a dict of those
    given), which warn with a DeprecationWarning naming the object they
    give. Raises a ValueError for anything else, or for both."""
    if legacy:
        if position is not None:
            raise ValueError(
                f"Give `position` or the deprecated {sorted(legacy)}, not both; "
                f"received position={position!r}."
            )
        position = position_from_legacy(legacy)
        warnings.warn(
            f"MultiHeadAttention({', '.join(sorted(legacy))}) is deprecated; pass "
            f"position={position!r} (keras_attn.layers.positions).",
            DeprecationWarning, stacklevel=3,
        )
    if isinstance(position, dict):
        position = keras.saving.deserialize_keras_object(position)
    if position is not None and not isinstance(position, Position):
        raise ValueError(
            "`position` must be None or a position object of keras_attn.layers.positions "
            f"(Rotary, XPos, ReRoPE, FunctionalRelative); received {position!r}."
        )
    return position


def translate_legacy_config(config):
    """A layer config saved before `position` existed, with the former
    arguments replaced by the `position` they give (silently: loading an
    old file is not a deprecated use)."""
    config = dict(config)
    legacy = {name: config.pop(name) for name in LEGACY_ARGUMENTS if name in config}
    if legacy:
        config["position"] = position_from_legacy(legacy)
    return config


def _legacy_value(layer, name):
    return legacy_arguments(layer.position)[name]


def with_legacy_attributes(cls):
    """`cls`, an attention layer class with a `position`, with read-only
    attributes of the former arguments (`layer.rotary_scaling`, ...) read
    from its position. They do not warn: Keras' saving reads every
    attribute of a layer."""
    for name in LEGACY_ARGUMENTS:
        setattr(cls, name, property(functools.partial(_legacy_value, name=name)))
    return cls
