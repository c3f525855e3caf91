"""The one weight-porting helper: applies a name table to a model."""

import re

import numpy as np

from keras_attn.checkpoints.readers import CheckpointError

# Variables whose rows are vocabulary entries: `keep_tokens` selects rows.
VOCABULARY_VARIABLES = ("Embedding-Token/embeddings", "MLM-Bias/bias")


class Source:
    """Where a variable is stored: accepted checkpoint names (tried in order,
    `{layer}` standing for the block index) and whether the stored array is
    the transpose of the Keras one."""

    def __init__(self, *names, transpose=False):
        self.names = names
        self.transpose = transpose

    def __repr__(self):
        return f"Source{self.names + (('transpose',) if self.transpose else ())}"


def _compile(table):
    compiled = []
    for template, source in table.items():
        pattern = re.escape(template).replace(re.escape("{layer}"), r"(?P<layer>\d+)")
        compiled.append((re.compile(pattern + "$"), source))
    return compiled


def _lookup(compiled, path):
    for pattern, source in compiled:
        match = pattern.match(path)
        if match:
            return True, source, match.groupdict().get("layer")
    return False, None, None


def port_weights(
    model,
    reader,
    table,
    candidates=lambda name: (name,),
    ignored=(),
    keep_tokens=None,
):
    """Loads every variable of `model` from `reader` through `table`, or
    nothing at all.

    All names and shapes are checked, and all arrays read, before the first
    variable is assigned, so a failed load leaves the model as it was.

    Args:
        model: a built `keras.Model`.
        reader: a `keras_attn.checkpoints.CheckpointReader`.
        table: dict of Keras variable path (with `{layer}`) -> `Source`, or
            `None` for variables that keep their initial value.
        candidates: function giving every stored spelling of a name.
        ignored: substrings of checkpoint names that are never model
            variables (optimizer slots, tied duplicates); left out of the
            list of unused names.
        keep_tokens: optional list of vocabulary ids; the token embedding and
            the masked-LM bias keep these rows, in this order.

    Raises:
        CheckpointError: listing every variable not found, every shape that
            disagrees (name, expected, found), every model variable the table
            does not cover, and the checkpoint's unused names.
    """
    compiled = _compile(table)
    stored = set(reader.names())
    plan, missing, mismatched, unmapped, used = [], [], [], [], set()
    for variable in model.weights:
        path = variable.path
        known, source, layer = _lookup(compiled, path)
        if not known:
            unmapped.append(path)
            continue
        if source is None:
            continue
        names = [name.format(layer=layer) for name in source.names]
        found = next(
            (c for name in names for c in candidates(name) if c in stored), None
        )
        if found is None:
            missing.append(f"{path} (looked for {' or '.join(names)})")
            continue
        used.add(found)
        shape = tuple(reader.shape(found))
        if source.transpose:
            shape = shape[::-1]
        if keep_tokens is not None and path in VOCABULARY_VARIABLES:
            bad = [i for i in keep_tokens if not 0 <= i < shape[0]]
            if bad:
                raise CheckpointError(
                    f"keep_tokens has ids outside the {shape[0]} rows of "
                    f"{found!r} in {reader.path!r}: {bad[:10]}"
                )
            shape = (len(keep_tokens),) + shape[1:]
        expected = tuple(variable.shape)
        if shape != expected:
            mismatched.append(f"{path} <- {found}: model expects {expected}, checkpoint has {shape}")
            continue
        plan.append((variable, found, source.transpose, path))

    if missing or mismatched or unmapped:
        unused = sorted(
            name
            for name in stored - used
            if not any(pattern in name for pattern in ignored)
        )
        sections = [
            ("variables not found in the checkpoint", missing),
            ("shapes that disagree (config and weights differ?)", mismatched),
            ("model variables this checkpoint format has no name for", unmapped),
            ("unused checkpoint names", unused),
        ]
        details = "\n".join(
            f"  {title} ({len(items)}):\n" + "\n".join(f"    {item}" for item in items)
            for title, items in sections
            if items
        )
        raise CheckpointError(
            f"Cannot load {reader.path!r} ({reader.format} format) into model "
            f"{model.name!r}; nothing was loaded.\n{details}"
        )

    arrays = []
    for variable, found, transpose, path in plan:
        array = np.asarray(reader.read(found))
        if transpose:
            array = array.T
        if keep_tokens is not None and path in VOCABULARY_VARIABLES:
            array = array[np.asarray(keep_tokens)]
        arrays.append(array)
    for (variable, *_), array in zip(plan, arrays):
        variable.assign(array.astype(variable.dtype))
