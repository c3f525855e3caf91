"""What a builder model accepts, checked where the user's data meets it."""

import numpy as np

from keras_attn.concrete import concrete_values
from keras_attn.concrete import static_dimension
from keras_attn.models.input_rules import LENGTH_RULE
from keras_attn.models.input_rules import NUMPY_OPS
from keras_attn.models.input_rules import VALUE_RULES

# Names users bring from other libraries, and what to pass instead.
FOREIGN_NAMES = {
    "input_ids": "pass the ids as 'token_ids'",
    "token_type_ids": "pass them as 'segment_ids'",
    "attention_mask": (
        "padding is derived from pad_token_id; to pass it explicitly, build the "
        "model with padding_mask_input=True and give it as 'padding_mask'"
    ),
    "position_ids": "positions are counted by the model",
}


class InputError(ValueError):
    """Inputs a model cannot compute a right answer for."""


class InputContract:
    """The inputs of a builder model: names, integer dtypes and value ranges.

    Every input is a `(batch, length)` tensor of integers in `[0, limit)`
    (`limit` 2 for a padding mask, which may also be boolean); floats only
    when integral. All inputs share one shape, with no empty axis, and
    `length` is at most `max_length` when the model has a learned position
    table. Names, dtypes and shapes are checked on every call, values wherever
    they are concrete, each rule stated once in `keras_attn.models.input_rules`.

    Args:
        limits: dict of input name -> number of allowed values, in the order
            of the model's inputs.
        max_length: the longest sequence the model can represent, or None.
        droppable: names of inputs accepted and ignored when all zero
            (`segment_ids` for a model without token types); a non-zero value
            is an error.
        descriptions: dict of input name -> what its limit is, for messages
            (e.g. `"vocab_size"`).
        vectors: dict of input name -> width, for float `(batch, width)`
            inputs such as `condition`, after the ids in the model's inputs;
            their batch is the ids' and their values must be finite.
        groups: dict of input name -> the group of inputs sharing its shape
            (an encoder-decoder's `"encoder"` and `"decoder"` inputs); one
            group when None. Every input shares the batch size.
    """

    def __init__(self, limits, max_length=None, droppable=(), descriptions=None, vectors=None,
                 groups=None):
        self.groups = dict(groups or {})
        self.limits = dict(limits)
        self.max_length = max_length
        self.droppable = tuple(droppable)
        self.descriptions = dict(descriptions or {})
        self.vectors = dict(vectors or {})

    @property
    def names(self):
        return tuple(self.limits) + tuple(self.vectors)

    # Structure: names, dtypes, ranks, shapes -------------------------------

    def check(self, inputs):
        """Checks `inputs` (see the class docstring) and returns the model's
        own inputs: the structure always, the values wherever they are
        concrete. Raises `InputError`."""
        inputs = self.as_dict(inputs)
        selected = self.select(inputs)
        self.check_values(inputs)
        return selected

    @property
    def positional_names(self):
        """The order of the list form, bert4keras's `[token_ids, segment_ids]`:
        `token_ids`, then `segment_ids` (also where it is droppable), then
        `padding_mask`, those the model takes."""
        order = ("token_ids", "segment_ids", "padding_mask")
        known = set(self.limits) | set(self.droppable)
        names = [name for name in order if name in known]
        names += [name for name in self.names if name not in order]
        return tuple(names)

    def as_dict(self, inputs):
        """`inputs` as a dict of arrays or tensors: nested lists become arrays; a
        list or tuple is read in `positional_names` order (`[token_ids]` alone
        where `segment_ids` is droppable and last); a single tensor is
        `token_ids` when the model takes nothing else. A list of another length
        is an `InputError` naming the order."""
        if isinstance(inputs, (list, tuple)):
            if inputs and all(is_array_like(value) for value in inputs):
                return self._from_positions(inputs)
            array = np.asarray(inputs) if _is_rectangular(inputs) else None
            if array is None or array.ndim == 3:
                return self._from_positions(inputs)
            inputs = array
        if not isinstance(inputs, dict):
            if len(self.names) == 1 and is_array_like(inputs):
                return {self.names[0]: inputs}
            raise InputError(
                f"The model takes a dict with the keys {self._expected()} or a list "
                f"in the order {list(self.positional_names)}; received "
                f"{type(inputs).__name__}."
            )
        return {
            name: np.asarray(value) if isinstance(value, (list, tuple)) else value
            for name, value in inputs.items()
        }

    def _from_positions(self, inputs):
        """The dict of a list or tuple of inputs, by `positional_names`."""
        order = self.positional_names
        lengths = {len(order)}
        if order[-1] in self.droppable and order[-1] not in self.limits:
            lengths.add(len(order) - 1)
        if len(inputs) not in lengths:
            accepted = " or ".join(str(list(order[:n])) for n in sorted(lengths))
            raise InputError(
                f"The model takes a list in the order {accepted} (or a dict with "
                f"those keys); received a {type(inputs).__name__} of {len(inputs)} "
                "inputs."
            )
        return {
            name: value if is_array_like(value) else np.asarray(value)
            for name, value in zip(order, inputs)
        }

    def select(self, inputs):
        """The model's inputs from the dict `inputs`, with droppable
        all-zero inputs left out; checks names, dtypes and shapes (not
        values) and raises `InputError`."""
        unknown = [key for key in inputs if key not in self.names and key not in self.droppable]
        if unknown:
            raise InputError(self._unknown_message(unknown))
        missing = [name for name in self.names if name not in inputs]
        if missing:
            raise InputError(
                f"Missing input(s) {missing}: the model takes the keys {self._expected()}; "
                f"received {sorted(inputs)}."
            )
        vectors = {name: value for name, value in inputs.items() if name in self.vectors}
        inputs = {name: value for name, value in inputs.items() if name not in self.vectors}
        for name, value in inputs.items():
            self._check_dtype(name, value)
        # Dimensions that are not plain integers (`None`, JAX's symbolic
        # dimensions under export, torch's traced sizes) are unknown here.
        shapes = {
            name: tuple(static_dimension(dim) for dim in value.shape)
            for name, value in inputs.items()
        }
        for name, shape in shapes.items():
            if len(shape) != 2:
                raise InputError(
                    f"Input '{name}' must be (batch, length); received shape {shape}."
                )
            if 0 in shape:
                raise InputError(
                    f"Input '{name}' is empty (shape {shape}); every batch needs at "
                    "least one sequence of at least one token."
                )
        for group in set(self.groups.get(name, "") for name in shapes):
            known = {
                name: shape for name, shape in shapes.items()
                if None not in shape and self.groups.get(name, "") == group
            }
            if len(set(known.values())) > 1:
                raise InputError(f"The inputs must share one shape; received {known}.")
        batches = {name: shape[0] for name, shape in shapes.items() if shape[0] is not None}
        if len(set(batches.values())) > 1:
            raise InputError(f"The inputs must share one batch size; received {batches}.")
        length = next((shape[1] for shape in shapes.values() if shape[1] is not None), None)
        self._check_length(length)
        batch = next((shape[0] for shape in shapes.values() if shape[0] is not None), None)
        for name, value in vectors.items():
            self._check_vector(name, value, batch)
        inputs.update(vectors)
        return {name: inputs[name] for name in self.names}

    def _check_vector(self, name, value, batch):
        dtype = getattr(value, "dtype", None)
        if dtype is None or _dtype_kind(dtype) not in "iuf":
            raise InputError(
                f"Input '{name}' must be a float array or tensor (batch, "
                f"{self.vectors[name]}); received "
                f"{type(value).__name__ if dtype is None else f'dtype {dtype}'}."
            )
        shape = tuple(value.shape)
        width = self.vectors[name]
        if len(shape) != 2 or shape[1] != width:
            raise InputError(
                f"Input '{name}' must be (batch, {width}); received shape {shape}."
            )
        if batch is not None and shape[0] is not None and shape[0] != batch:
            raise InputError(
                f"Input '{name}' has a batch of {shape[0]}, the ids a batch of {batch}."
            )

    def check_values(self, inputs):
        """Checks the values of concrete inputs (numpy arrays or eager
        tensors) by the rules of `keras_attn.models.input_rules`: integral,
        in range, all-zero where droppable, finite vectors. Returns
        `inputs`."""
        concrete = {}
        for name, value in inputs.items():
            array = concrete_values(value)
            if array is not None:
                concrete[name] = array
        _raise_first_broken(self.value_checks(concrete, NUMPY_OPS))
        return inputs

    def value_checks(self, inputs, ops):
        """`(broken, message)` for each rule of `VALUE_RULES` that applies to each
        of `inputs` (see `Rule.check`), computed with `ops` (numpy, or TensorFlow
        in a `tf.data` pipeline); the first broken one is the error."""
        for name in dict.fromkeys((*self.names, *self.droppable)):
            if name not in inputs:
                continue
            values = ops.values(inputs[name])
            for rule in VALUE_RULES:
                if rule.applies(self, name, ops.is_float(values)):
                    yield rule.check(ops, values, self, name)

    def length_checks(self, length, ops):
        """`(broken, message)` of `LENGTH_RULE` for the inputs' sequence
        `length`, where the model has a position table (else nothing)."""
        if LENGTH_RULE.applies(self, name=None, is_float=False):
            yield LENGTH_RULE.check(ops, ops.values(length), self)

    def _check_dtype(self, name, value):
        dtype = getattr(value, "dtype", None)
        if dtype is None:
            raise InputError(
                f"Input '{name}' must be an array or tensor of integers; received "
                f"{type(value).__name__}."
            )
        kind = _dtype_kind(dtype)
        allowed = "iuf" + ("b" if self.limits.get(name) == 2 else "")
        if kind not in allowed:
            what = "integers or booleans" if "b" in allowed else "integers"
            raise InputError(f"Input '{name}' must hold {what}; received dtype {dtype}.")

    def _check_length(self, length):
        if length is not None:
            _raise_first_broken(self.length_checks(length, NUMPY_OPS))

    def _expected(self):
        return list(self.names)

    def _unknown_message(self, unknown):
        hints = "".join(
            f" '{key}': {FOREIGN_NAMES[key]}." for key in unknown if key in FOREIGN_NAMES
        )
        return (
            f"Unknown input key(s) {unknown}: the model takes the keys "
            f"{self._expected()}.{hints}"
        )

    def get_config(self):
        return {
            "limits": self.limits,
            "max_length": self.max_length,
            "droppable": list(self.droppable),
            "descriptions": self.descriptions,
            "vectors": self.vectors,
            "groups": self.groups,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _raise_first_broken(checks):
    """Raises the message of the first broken `(broken, message)` check."""
    for broken, message in checks:
        if broken:
            raise InputError(message())


def _is_rectangular(nested):
    """Whether nested lists form one rectangular array (not a list of
    several arrays of different shapes)."""
    try:
        np.asarray(nested)
    except ValueError:
        return False
    return True


def is_array_like(value):
    """Whether `value` is an array or tensor (anything with a shape and dtype)."""
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _dtype_kind(dtype):
    from keras import backend

    try:
        name = backend.standardize_dtype(dtype)
    except ValueError:
        return "?"
    if name == "bool":
        return "b"
    if name.startswith(("int", "uint")):
        return "i"
    if name.startswith(("float", "bfloat", "half", "double")):
        return "f"
    try:
        return np.dtype(name).kind
    except TypeError:
        return "?"
