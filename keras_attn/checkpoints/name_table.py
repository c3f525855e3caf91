"""`NameTable`: how one checkpoint format stores a model's variables."""

import dataclasses
import warnings
from collections.abc import Callable
from collections.abc import Mapping


def as_written(name):
    """A format that spells every name one way."""
    return (name,)


@dataclasses.dataclass(frozen=True)
class NameTable:
    """A checkpoint format's names for a model's variables, which
    `porting.port_weights` applies.

    Attributes:
        entries: Keras variable path (`{layer}` for the block index, see
            `keras_attn.layer_names`) -> `Source`.
        spellings: `name -> iterable of names`: every stored spelling of a
            `Source` name (task-model prefixes, legacy spellings), tried in
            order.
        ignored: substrings of checkpoint names that are never model
            variables (optimizer slots, buffers, another model stored
            beside this one), left out of the list of unused names.
        duplicates: checkpoint name -> the name it may be a copy of (a tied
            decoder and the token embedding): an unused copy is reported
            only when it differs from its partner.
        optional_parts: prefixes of Keras layer names a model may be built
            without (T5's `"Decoder-"` for `t5_encoder`); the stored weights
            of such a part are not reported unused.
        check_stored: `(reader, model) -> list of sentences`, why arrays the
            checkpoint stores but no variable takes differ from what the
            model computes itself (RoFormer's sinusoids); None: nothing to
            check.
        prefixes: the task-model prefixes `spellings` adds (for messages and
            tests; `spellings` alone decides what is read).
    """

    entries: Mapping
    spellings: Callable = as_written
    ignored: tuple = ()
    duplicates: Mapping = dataclasses.field(default_factory=dict)
    optional_parts: tuple = ()
    check_stored: Callable | None = None
    prefixes: tuple = ("",)

    def candidates(self, name):
        """Every stored spelling of `name`, in the order tried."""
        return tuple(self.spellings(name))

    def replace(self, **changes):
        """This table with `changes` (`entries`, `ignored`, ...)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, table):
        """`table` as a `NameTable`: itself, or a name-table module or
        namespace of the older spelling (`TABLE`, `candidates`, `IGNORED`,
        `DUPLICATES`, optionally `OPTIONAL_PARTS`, `check_stored`), read with
        a `DeprecationWarning`."""
        if isinstance(table, cls):
            return table
        warnings.warn(
            "A name table given as a module or namespace of TABLE, candidates, IGNORED "
            "and DUPLICATES is deprecated; give a keras_attn.checkpoints.name_table."
            "NameTable(entries=..., spellings=..., ignored=..., duplicates=...).",
            DeprecationWarning,
            stacklevel=3,
        )
        optional = {
            "optional_parts": getattr(table, "OPTIONAL_PARTS", ()),
            "check_stored": getattr(table, "check_stored", None),
        }
        return cls(
            entries=table.TABLE,
            spellings=table.candidates,
            ignored=tuple(table.IGNORED),
            duplicates=dict(table.DUPLICATES),
            **optional,
        )


def under(prefix, *top_level):
    """The `spellings` of a format whose task models store the base model's
    weights under `prefix` (`"model."`) and their heads, the names starting
    with one of `top_level`, at the top: a name bare, or under `prefix`."""

    def spellings(name):
        if top_level and name.startswith(top_level):
            return (name,)
        return (name, f"{prefix}{name}")

    return spellings


def prefixed(*prefixes):
    """The `spellings` of a format that stores every name behind any of
    `prefixes` (`""` for bare), in that order."""

    def spellings(name):
        return tuple(prefix + name for prefix in prefixes)

    return spellings
