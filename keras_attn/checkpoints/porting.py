"""The one weight-porting helper: applies a name table to a model."""

import fnmatch
import re
import warnings

import numpy as np

from keras_attn import keras_internals
from keras_attn import layer_names as names
from keras_attn.checkpoints import families
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.readers import CheckpointError
from keras_attn.checkpoints.readers import SkippedWeightsWarning
from keras_attn.checkpoints.readers import UnusedWeightsWarning
from keras_attn.checkpoints.source import Source  # noqa: F401  (where it was defined before)

# Variables with a vocabulary axis (its index in the Keras variable):
# `keep_tokens` selects entries along it and `compound_tokens` appends
# averaged entries to it.
VOCABULARY_VARIABLES = {
    f"{names.EMBEDDING_TOKEN}/embeddings": 0,
    f"{names.MLM_BIAS}/bias": 0,
    f"{names.MLM_DECODER}/kernel": 1,
    f"{names.DECODER_OUTPUT_LM}/kernel": 1,
}

# Heads a model is built with or without (`with_pool`, `with_nsp`,
# `application`): their checkpoint weights are left out by choice, not
# reported as unused.
OPTIONAL_HEADS = (
    f"{names.POOLER}/", f"{names.NSP}/", names.MLM_LAYERS, names.DISCRIMINATOR_LAYERS
)


def name_prefix(model):
    """The `prefix` `model`'s layer names were built with (see
    `keras_attn.Transformer`), or `""`."""
    return getattr(getattr(model, "template", None), "prefix", "") or ""


def table_path(path, prefix):
    """A variable path as the name tables know it: without the model's
    layer-name `prefix`."""
    return path[len(prefix):] if prefix and path.startswith(prefix) else path


def checkpoint_free_paths(model):
    """The paths of the variables no pretrained checkpoint holds.

    A layer declares them by name in a `checkpoint_free_weights` class
    attribute (e.g. `TalkingHeadsAttention`'s `("pre_softmax_kernel",
    "post_softmax_kernel")`, `KerpleBias`'s `("r1", "r2")`); a variable's
    path is its layer's path and its name, `layer/name` (without the
    model's layer-name prefix, as the name tables know it).
    """
    prefix = name_prefix(model)
    paths = set()
    for layer in keras_internals.all_layers(model):
        for name in getattr(layer, "checkpoint_free_weights", ()):
            paths.add(table_path(f"{layer.path}/{name}", prefix))
    return paths


def skip_patterns(model, skip_missing):
    """`skip_missing` as a tuple of patterns, and a function telling whether
    a variable path matches one (by its path or its layer's name, the part
    before the first `/`). A pattern matching no variable of `model` is a
    ValueError listing the model's layers."""
    if skip_missing is None:
        return (), lambda path: False
    if isinstance(skip_missing, str):
        skip_missing = (skip_missing,)
    patterns = tuple(skip_missing)
    if not all(isinstance(pattern, str) and pattern for pattern in patterns):
        raise ValueError(
            f"skip_missing must be a list of layer names or patterns such as 'MLM-*'; "
            f"received {skip_missing!r}."
        )

    def matches(pattern, path):
        return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(
            path.split("/")[0], pattern
        )

    prefix = name_prefix(model)
    paths = [table_path(variable.path, prefix) for variable in model.weights]
    unmatched = [p for p in patterns if not any(matches(p, path) for path in paths)]
    if unmatched:
        layer_names = sorted({path.split("/")[0] for path in paths})
        raise ValueError(
            f"skip_missing entries {unmatched} match no weight of model {model.name!r}; "
            f"its layers with weights are {layer_names}."
        )
    return patterns, lambda path: any(matches(p, path) for p in patterns)


def _compile(table):
    compiled = []
    for template, source in table.items():
        pattern = re.escape(template).replace(re.escape("{layer}"), r"(?P<layer>\d+)")
        compiled.append((re.compile(pattern + "$"), source))
    return compiled


def _lookup(compiled, path):
    """The `Source` of variable `path` and its block index, or `(None, None)`."""
    for pattern, source in compiled:
        match = pattern.match(path)
        if match:
            layer = match.groupdict().get("layer")
            return source, None if layer is None else int(layer)
    return None, None


def compound_token_groups(compound_tokens, vocab_size=None):
    """`compound_tokens` checked and as a list of lists of ints.

    Each group is a non-empty list of vocabulary ids (after any
    `keep_tokens` selection); with `vocab_size`, every id must lie in
    `[0, vocab_size)`.

    Raises:
        ValueError: not a list of groups, an empty group, an id that is not
            an integer or, with `vocab_size`, is out of range (the message
            names the group and the id).
    """
    if isinstance(compound_tokens, (str, bytes)) or not hasattr(compound_tokens, "__iter__"):
        raise ValueError(
            "compound_tokens must be a list of groups of vocabulary ids, e.g. "
            f"[[12, 40], [7]]; received {compound_tokens!r}."
        )
    groups = []
    for position, group in enumerate(compound_tokens):
        if isinstance(group, (str, bytes)) or not hasattr(group, "__iter__"):
            raise ValueError(
                f"compound_tokens[{position}] must be a list of vocabulary ids; "
                f"received {group!r}."
            )
        group = list(group)
        if not group:
            raise ValueError(
                f"compound_tokens[{position}] is empty: a new token is the mean of "
                "at least one existing token's entries."
            )
        ids = []
        for token in group:
            if not _is_integral(token):
                raise ValueError(
                    f"compound_tokens[{position}] holds {token!r}, which is not a "
                    "vocabulary id."
                )
            ids.append(int(token))
        bad = [] if vocab_size is None else ids_outside(ids, vocab_size)
        if bad:
            raise ValueError(
                f"compound_tokens[{position}] holds ids outside the vocabulary of "
                f"{vocab_size} tokens (after keep_tokens): {bad}"
            )
        groups.append(ids)
    return groups


def ids_outside(ids, size):
    """The distinct ids of `ids` outside `0 .. size - 1`, the ten smallest
    (for a message)."""
    return sorted({i for i in ids if not 0 <= i < size})[:10]


def check_vocabulary_ids(argument, ids, entries, name, path, note=""):
    """Raises a `CheckpointError` if `ids` (given as `argument`) index
    outside the `entries` vocabulary entries of checkpoint variable `name`
    in the checkpoint at `path`."""
    bad = ids_outside(ids, entries)
    if bad:
        raise CheckpointError(
            f"{argument} has ids outside the {entries} vocabulary entries of {name!r} "
            f"in {path!r}{note}: {bad}"
        )


def _is_integral(value):
    """Whether `value` is an integer (a Python or numpy int, or an integral
    float), not a bool."""
    if isinstance(value, (bool, np.bool_)):
        return False
    try:
        return float(value).is_integer()
    except (TypeError, ValueError):
        return False


def vocabulary_entries(array, axis, keep_tokens=None, compound_tokens=None):
    """`array`'s entries along its vocabulary `axis`: those of `keep_tokens`
    (in that order, all when None), then one entry per `compound_tokens`
    group, the mean of the group's entries (ids into the kept entries).

    For a group `g`, the new entry is `sum(array[i] for i in g) / len(g)`
    (taken along `axis`), as bert4keras initialises the rows of
    `compound_tokens`.
    """
    if keep_tokens is not None:
        array = np.take(array, np.asarray(keep_tokens, dtype="int64"), axis=axis)
    if compound_tokens:
        means = [
            np.take(array, np.asarray(group, dtype="int64"), axis=axis).mean(
                axis=axis, keepdims=True
            )
            for group in compound_tokens
        ]
        array = np.concatenate([array] + means, axis=axis)
    return array


def port_weights(model, reader, name_table, keep_tokens=None, skip_missing=None,
                 compound_tokens=None):
    """Loads every variable of `model` from `reader` through a name table, or
    nothing at all.

    All names and shapes are checked, and all arrays read, before the first
    variable is assigned, so a failed load leaves the model as it was.
    Variables a layer declares checkpoint-free (see `checkpoint_free_paths`)
    are not looked up and keep their values.

    Args:
        model: a built `keras.Model`.
        reader: a `keras_attn.checkpoints.CheckpointReader`.
        name_table: the format's `NameTable` (a module or namespace of
            the older `TABLE`, `candidates`, `IGNORED`, `DUPLICATES` is read
            with a `DeprecationWarning`).
        keep_tokens: optional list of vocabulary ids; the token embedding,
            the masked-LM bias and an untied decoder keep these entries, in
            this order.
        compound_tokens: optional list of groups of vocabulary ids (ids
            after `keep_tokens`); the same variables get one more entry per
            group, the mean of the group's entries (see
            `vocabulary_entries`).
        skip_missing: optional patterns (see `load_checkpoint`) naming the
            variables that keep their initial values when the checkpoint
            lacks them, instead of failing the load.

    Raises:
        CheckpointError: listing every variable not found, every shape that
            disagrees (name, expected, found), every model variable the table
            does not cover, and the checkpoint's unused names.
        ValueError: a `skip_missing` pattern that matches no variable.

    Warns:
        UnusedWeightsWarning: after a complete load, listing the checkpoint
            names no variable took (layers beyond the config's, a position
            table the variant has no use for, a decoder differing from the
            embedding), except `ignored` ones, equal `duplicates` and the
            weights of heads the model was built without.
        SkippedWeightsWarning: after a complete load, listing the variables
            `skip_missing` left at their initial values.

    Returns:
        The checkpoint names left out as the weights of heads the model was
        built without (a discriminator head under `application="encoder"`),
        sorted; `keras-attn-convert` reports them.
    """
    name_table = NameTable.of(name_table)
    candidates = name_table.candidates
    compiled = _compile(name_table.entries)
    stored = set(reader.names())
    checkpoint_free = checkpoint_free_paths(model)
    patterns, may_skip = skip_patterns(model, skip_missing)
    prefix = name_prefix(model)
    plan, missing, mismatched, unmapped, used, skipped = [], [], [], [], set(), []
    # The widths of the variables an unequal split names (`Source.parts`).
    widths_of = {table_path(v.path, prefix): tuple(v.shape)[-1] for v in model.weights}
    # The other accepted names of loaded variables (a stale `cls.predictions.bias`
    # beside the decoder bias the logits use): never reported as unused.
    alternatives = set()
    for variable in model.weights:
        path = table_path(variable.path, prefix)
        if path in checkpoint_free:
            continue
        source, layer = _lookup(compiled, path)
        if source is None:
            unmapped.append(path)
            continue
        looked_for = [name.format(layer=layer) for name in source.names]
        found = next(
            (c for name in looked_for for c in candidates(name) if c in stored), None
        )
        if found is None:
            if may_skip(path):
                skipped.append(path)
            else:
                missing.append(f"{path} (looked for {' or '.join(looked_for)})")
            continue
        used.add(found)
        alternatives.update(c for name in looked_for for c in candidates(name))
        widths = None
        if source.parts is not None:
            widths = tuple(widths_of.get(part.format(layer=layer), 0) for part in source.parts)
        shape = source.shape(reader.shape(found), widths)
        if path in VOCABULARY_VARIABLES and (keep_tokens is not None or compound_tokens):
            axis = VOCABULARY_VARIABLES[path]
            entries = shape[axis]
            if keep_tokens is not None:
                check_vocabulary_ids("keep_tokens", keep_tokens, entries, found, reader.path)
                entries = len(keep_tokens)
            if compound_tokens:
                check_vocabulary_ids(
                    "compound_tokens", [i for group in compound_tokens for i in group],
                    entries, found, reader.path, note=" (after keep_tokens)",
                )
                entries += len(compound_tokens)
            shape = shape[:axis] + (entries,) + shape[axis + 1 :]
        expected = tuple(variable.shape)
        if shape != expected:
            mismatched.append(f"{path} <- {found}: model expects {expected}, checkpoint has {shape}")
            continue
        plan.append((variable, found, source, path, widths))

    unused = sorted(
        name
        for name in stored - used - alternatives
        if not any(pattern in name for pattern in name_table.ignored)
    )
    # Stored arrays that no variable takes but that must hold what the
    # model computes itself (RoFormer's sinusoid table).
    check_stored = name_table.check_stored
    differing = [] if check_stored is None else check_stored(reader, model)
    if missing or mismatched or unmapped or differing:
        other_family = _other_family_hint(stored, name_table)
        raise refusal(
            f"{reader.path!r} ({reader.format} format)",
            model,
            [
                ("variables not found in the checkpoint", missing),
                ("shapes that disagree (config and weights differ?)", mismatched),
                ("model variables this checkpoint format has no name for", unmapped),
                ("unused checkpoint names", unused),
                ("stored arrays that differ from what the model computes", differing),
            ],
            hint=_skip_hint(missing) if not other_family else other_family,
        )

    arrays = []
    for variable, found, source, path, widths in plan:
        array = source.value(np.asarray(reader.read(found)), widths)
        if path in VOCABULARY_VARIABLES:
            array = vocabulary_entries(
                array, VOCABULARY_VARIABLES[path], keep_tokens, compound_tokens
            )
        arrays.append(array)
    for (variable, *_), array in zip(plan, arrays):
        variable.assign(array.astype(variable.dtype))

    unused, heads_left_out = _reportable(
        unused, reader, name_table, [table_path(v.path, prefix) for v in model.weights]
    )
    warn_unused(
        unused,
        f"{reader.path!r} ({reader.format} format)",
        model,
        "fewer layers than the checkpoint? a variant without these weights?",
    )
    if skipped:
        warnings.warn(
            SkippedWeightsWarning(
                f"{len(skipped)} weights of model {model.name!r} are not in "
                f"{reader.path!r} and keep their initial values, as "
                f"skip_missing={list(patterns)} allows:\n"
                + "\n".join(f"    {path}" for path in skipped)
            ),
            stacklevel=3,
        )
    return heads_left_out


def _other_family_hint(stored, name_table):
    """A sentence naming the family and variant of a checkpoint whose names
    are another family's than the table's (by the families' `markers`), or
    None."""
    own = " ".join(
        spelling
        for source in name_table.entries.values()
        for name in source.names
        for spelling in name_table.candidates(name)
    )
    for family, marker in families.markers():
        if marker.substring not in own and any(marker.substring in name for name in stored):
            return (
                f"The checkpoint holds {family.title} weights (names with "
                f"{marker.substring!r}): build the model with variant={marker.variants}."
            )
    return None


def _skip_hint(missing):
    """How to load anyway when weights are missing: `skip_missing=` with
    their layers' names."""
    if not missing:
        return None
    layer_names = sorted({item.split("/")[0] for item in missing})
    return (
        "To leave the missing weights at their initial values (an encoder-only "
        "checkpoint loaded into an 'mlm'/'lm'/'unilm' model or one with_pool, say), "
        f"pass skip_missing={layer_names}."
    )


def refusal(source, model, sections, hint=None):
    """The `CheckpointError` of a load refused before anything was assigned:
    `sections` are `(title, items)` pairs, listed where non-empty, then the
    `hint`, if any."""
    details = "\n".join(
        f"  {title} ({len(items)}):\n" + "\n".join(f"    {item}" for item in items)
        for title, items in sections
        if items
    )
    return CheckpointError(
        f"Cannot load {source} into model {model.name!r}; nothing was loaded.\n{details}"
        + (f"\n{hint}" if hint else "")
    )


def warn_unused(unused, source, model, guess):
    """An `UnusedWeightsWarning` listing the `unused` names of `source`."""
    if unused:
        warnings.warn(
            UnusedWeightsWarning(
                f"{len(unused)} weights of {source} were not used by model "
                f"{model.name!r} ({guess}):\n" + "\n".join(f"    {name}" for name in unused)
            ),
            stacklevel=4,
        )


def _reportable(unused, reader, name_table, model_paths):
    """The unused names worth a warning (not the weights of a head the model
    was built without, not an equal copy of a stored partner), and the
    names of those heads' weights."""
    candidates = name_table.candidates
    absent = tuple(
        head for head in OPTIONAL_HEADS + name_table.optional_parts
        if not any(p.startswith(head) for p in model_paths)
    )
    heads = [
        re.compile(re.sub(r"\\\{layer[^}]*\\\}", r"\\d+", re.escape(candidate)))
        for path, source in name_table.entries.items()
        if path.startswith(absent)
        for name in source.names
        for candidate in candidates(name)
    ]
    stored = set(reader.names())
    copies = {}
    for name, partner in name_table.duplicates.items():
        original = next((c for c in candidates(partner) if c in stored), None)
        for copy in candidates(name):
            copies[copy] = original
    reportable, heads_left_out = [], []
    for name in unused:
        if any(head.fullmatch(name) for head in heads):
            heads_left_out.append(name)
            continue
        original = copies.get(name)
        if original is not None and np.array_equal(reader.read(name), reader.read(original)):
            continue
        reportable.append(name)
    return reportable, heads_left_out
