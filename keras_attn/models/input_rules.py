"""The rules on input values, each stated once with the operations of an
`ops` namespace (`NUMPY_OPS` for concrete inputs, `TENSORFLOW_OPS` inside
a `tf.data` pipeline), so both check the same thing with the same message."""

import string

import numpy as np


class Rule:
    """One rule on input values: where it applies, which elements break it,
    and the message naming the first of them.

    Args:
        applies: `(contract, name, is_float) -> bool`: whether the rule
            applies to input `name` of `contract`, whose values are floats
            or not.
        offending: `(ops, x, contract, name) -> boolean array`: the
            elements of `x` that break the rule, computed with `ops`.
        message: a `str.format` template. `{value}` and `{where}` are the
            first offending element (row-major) and its position; `{name}`,
            `{limit}`, `{described}`, `{expected}` and `{max_length}` come
            from the contract.
    """

    def __init__(self, applies, offending, message):
        self.applies = applies
        self.offending = offending
        self.message = message

    def check(self, ops, x, contract, name=None):
        """`(broken, message)`: whether some element of `x` breaks the rule
        (a boolean of `ops`), and a function of no arguments returning the
        message; call it only where `broken`, as it reads the first
        offending element."""
        offending = self.offending(ops, x, contract, name)

        def message():
            where = ops.first(offending)
            fields = dict(
                _contract_fields(contract, name),
                value=ops.number(ops.at(x, where)),
                where=ops.position(where),
            )
            return ops.fill(self.message, fields)

        return ops.any(offending), message


def _contract_fields(contract, name):
    limit = contract.limits.get(name)
    return {
        "name": str(name),
        "limit": str(limit),
        "described": contract.descriptions.get(name, "limit"),
        "expected": str(list(contract.names)),
        "max_length": str(contract.max_length),
    }


def _is_dropped(contract, name):
    """Whether `name` is accepted only to be ignored (all zero)."""
    return name in contract.droppable and name not in contract.limits


# The rules on an input's values, in the order they are checked; the first
# broken one is reported.
VALUE_RULES = (
    Rule(
        applies=lambda contract, name, is_float: is_float and name not in contract.vectors,
        offending=lambda ops, x, contract, name: ~(ops.isfinite(x) & (x == ops.round(x))),
        message="Input '{name}' holds the non-integer value {value} at {where}; ids must be integers.",
    ),
    Rule(
        applies=lambda contract, name, is_float: _is_dropped(contract, name),
        offending=lambda ops, x, contract, name: x != 0,
        message=(
            "Input '{name}' is not all zero ({value} at {where}), but this model has no "
            "'{name}' (it takes {expected}); it ignores '{name}' only when every value is 0."
        ),
    ),
    Rule(
        applies=lambda contract, name, is_float: name in contract.limits,
        offending=lambda ops, x, contract, name: (x < 0) | (x >= contract.limits[name]),
        message="Input '{name}' holds {value} at {where}; it must be in [0, {limit}) ({described}={limit}).",
    ),
    Rule(
        applies=lambda contract, name, is_float: is_float and name in contract.vectors,
        offending=lambda ops, x, contract, name: ~ops.isfinite(x),
        message="Input '{name}' holds a non-finite value ({value} at {where}); it must be finite.",
    ),
)

# The rule on the sequence length the inputs share, checked on the length
# itself (a scalar, the message's {value}): a learned position table has no
# row past `max_length`.
LENGTH_RULE = Rule(
    applies=lambda contract, name, is_float: contract.max_length is not None,
    offending=lambda ops, length, contract, name: length > contract.max_length,
    message=(
        "Sequence length {value} exceeds the {max_length} positions this model has (its "
        "learned position table); truncate the inputs, e.g. with the tokenizer's maxlen."
    ),
)


def _significant_digits(dtype_name):
    """Digits that tell every value of a float dtype apart."""
    return 17 if dtype_name == "float64" else 9


class _NumpyOps:
    """The operations of the rules on numpy arrays (concrete inputs)."""

    @staticmethod
    def values(x):
        """`x` as the rules read it: booleans and integers as int64, bfloat16 as
        float32; a Python int (the length) as it is, which `torch.compile` traces."""
        if isinstance(x, int):
            return x
        x = np.asarray(x)
        if x.dtype.kind in "biu":
            return x.astype(np.int64, copy=False)
        if x.dtype.kind != "f":
            return x.astype(np.float32)
        return x

    @staticmethod
    def is_float(x):
        return x.dtype.kind == "f"

    isfinite = staticmethod(np.isfinite)
    round = staticmethod(np.round)

    @staticmethod
    def any(mask):
        if isinstance(mask, bool):
            return mask
        return bool(np.any(mask))

    @staticmethod
    def first(mask):
        return tuple(int(i) for i in np.argwhere(mask)[0])

    @staticmethod
    def at(x, where):
        return np.asarray(x)[where]

    @staticmethod
    def number(value):
        if value.dtype.kind != "f":
            return str(int(value))
        return "%.*g" % (_significant_digits(value.dtype.name), float(value))

    @staticmethod
    def position(where):
        return "(" + ", ".join(str(i) for i in where) + ")"

    @staticmethod
    def fill(template, fields):
        return template.format(**fields)


class _TensorFlowOps:
    """The operations of the rules on TensorFlow tensors, for a `tf.data`
    pipeline; each gives what `_NumpyOps`'s gives, as a tensor."""

    @staticmethod
    def values(x):
        tf = _tensorflow()
        if x.dtype.is_bool or x.dtype.is_integer:
            return tf.cast(x, "int64")
        return x

    @staticmethod
    def is_float(x):
        return x.dtype.is_floating

    @staticmethod
    def isfinite(x):
        return _tensorflow().math.is_finite(x)

    @staticmethod
    def round(x):
        return _tensorflow().round(x)

    @staticmethod
    def any(mask):
        return _tensorflow().reduce_any(mask)

    # `tf.where` and `tf.gather_nd` take no scalar, such as the length.

    @staticmethod
    def first(mask):
        tf = _tensorflow()
        if mask.shape.rank == 0:
            return tf.zeros([0], "int64")
        return tf.where(mask)[0]

    @staticmethod
    def at(x, where):
        if x.shape.rank == 0:
            return x
        return _tensorflow().gather_nd(x, where)

    @staticmethod
    def number(value):
        tf = _tensorflow()
        if not value.dtype.is_floating:
            return tf.strings.as_string(value)
        digits = _significant_digits(value.dtype.name)
        return tf.strings.as_string(tf.cast(value, "float64"), precision=digits, shortest=True)

    @staticmethod
    def position(where):
        tf = _tensorflow()
        joined = tf.strings.reduce_join(tf.strings.as_string(where), separator=", ")
        return tf.strings.join(["(", joined, ")"])

    @staticmethod
    def fill(template, fields):
        parts = []
        for literal, field, _, _ in string.Formatter().parse(template):
            parts.append(literal)
            if field is not None:
                parts.append(fields[field])
        return _tensorflow().strings.join(parts)


def _tensorflow():
    import tensorflow as tf

    return tf


NUMPY_OPS = _NumpyOps()
TENSORFLOW_OPS = _TensorFlowOps()
