"""The seams of checkpoint loading: `NameTable`, `Source`'s parts and value
transforms, and `keras_attn.layer_names`, which the template and every
table spell their layer names with."""

import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import keras_attn
from keras_attn import layer_names as names
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.porting import port_weights
from keras_attn.checkpoints.readers import CheckpointReader
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import fused
from keras_attn.checkpoints.source import torch_linear
from keras_attn.models import VARIANTS
from tests.models import test_variants

CONFIG = dict(test_variants.CONFIG, vocab_size=60, num_hidden_layers=2)


class DictReader(CheckpointReader):
    """A checkpoint held in a dict of arrays."""

    format = "safetensors"

    def __init__(self, arrays):
        super().__init__("in-memory")
        self.arrays = arrays

    def names(self):
        return list(self.arrays)

    def shape(self, name):
        return tuple(self.arrays[name].shape)

    def read(self, name):
        return self.arrays[name]

    def __contains__(self, name):
        return name in self.arrays


def stored_under_keras_paths(model, offset=0.0):
    """A `NameTable` storing every variable of `model` under its own path,
    and those arrays (each filled with distinct values, `- offset` for the
    norms' scales)."""
    rng = np.random.default_rng(3)
    arrays, entries = {}, {}
    for variable in model.weights:
        value = rng.normal(size=variable.shape).astype("float32")
        arrays[variable.path] = value - offset if variable.path.endswith("/gamma") else value
        entries[variable.path] = Source(variable.path)
    return NameTable(entries=entries), arrays


def test_source_splits_equal_given_and_model_widths():
    stored = np.arange(4 * 9, dtype="float32").reshape(4, 9)
    np.testing.assert_array_equal(Source("w", part=(1, 3)).value(stored), stored[:, 3:6])
    given = Source("w", part=(1, (5, 2, 2)))
    assert given.parts is None
    assert given.shape((4, 9)) == (4, 2)
    np.testing.assert_array_equal(given.value(stored), stored[:, 5:7])
    from_model = Source("w", part=(0, ("q/kernel", "k/kernel", "v/kernel")))
    assert from_model.parts == ("q/kernel", "k/kernel", "v/kernel")
    np.testing.assert_array_equal(from_model.value(stored, widths=(5, 2, 2)), stored[:, :5])
    with pytest.raises(ValueError, match="widths"):
        from_model.value(stored)


def test_source_transform_applies_after_the_transpose_and_the_split():
    stored = np.arange(6 * 4, dtype="float32").reshape(6, 4)
    source = Source("w", transpose=True, part=(1, 2), transform=lambda w: 1.0 + w)
    np.testing.assert_array_equal(source.value(stored), 1.0 + stored.T[:, 3:])
    assert source.shape(stored.shape) == (4, 3)


def test_fused_gives_each_layer_its_slice_of_one_projection():
    entries = fused(("a", "b"), "fused", torch_linear)
    assert entries["a/kernel"].part == (0, 2) and entries["b/bias"].part == (1, 2)
    assert entries["b/kernel"].names == ("fused.weight",) and entries["b/kernel"].transpose
    by_model = fused(("a", "b"), "fused", torch_linear, widths_from_model=True)
    assert by_model["b/kernel"].parts == ("a/kernel", "b/kernel")
    assert by_model["b/bias"].parts == ("a/bias", "b/bias")
    given = fused(("a", "b"), "fused", torch_linear, widths=(6, 2))
    stored = np.arange(8 * 3, dtype="float32").reshape(8, 3)
    np.testing.assert_array_equal(given["b/kernel"].value(stored), stored.T[:, 6:])
    np.testing.assert_array_equal(given["a/bias"].value(stored[:, 0]), stored[:6, 0])


def test_a_transform_in_the_table_reads_a_norm_stored_with_its_offset():
    model = keras_attn.build_transformer_model(CONFIG, variant="bert")
    table, arrays = stored_under_keras_paths(model, offset=1.0)
    norm = f"{names.EMBEDDING_NORM}/gamma"
    # Stored as `w - 1` (a `1 + w` norm); the table adds the one back.
    entries = dict(table.entries)
    entries[norm] = Source(norm, transform=lambda w: 1.0 + w)
    port_weights(model, DictReader(arrays), table.replace(entries=entries))
    loaded = {variable.path: np.asarray(variable.numpy()) for variable in model.weights}
    np.testing.assert_allclose(loaded[norm], arrays[norm] + 1.0)
    # Every other norm is read as stored: the transform is the table's, not the loader's.
    other = names.norm(names.attention(0)) + "/gamma"
    np.testing.assert_allclose(loaded[other], arrays[other])
    port_weights(model, DictReader(arrays), table)
    np.testing.assert_allclose(np.asarray(model.get_layer(names.EMBEDDING_NORM).gamma), arrays[norm])


def test_a_table_of_the_older_spelling_loads_with_a_deprecation_warning():
    model = keras_attn.build_transformer_model(CONFIG, variant="bert")
    table, arrays = stored_under_keras_paths(model)
    older = SimpleNamespace(
        TABLE=table.entries, candidates=lambda name: (name,), IGNORED=(), DUPLICATES={}
    )
    with pytest.warns(DeprecationWarning, match="NameTable"):
        port_weights(model, DictReader(arrays), older)
    for variable in model.weights:
        np.testing.assert_array_equal(np.asarray(variable.numpy()), arrays[variable.path])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        port_weights(model, DictReader(arrays), table)


def test_spellings_are_read_by_attribute_and_tried_in_order():
    table = NameTable(entries={}, spellings=lambda name: iter((name, "model." + name)))
    assert table.candidates("x") == ("x", "model.x")
    assert NameTable(entries={}).candidates("x") == ("x",)
    assert NameTable.of(table) is table


def spelled_names(layers):
    """Every name `keras_attn.layer_names` spells, for blocks `0 .. layers - 1`."""
    spelled = {
        value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)
    } | set(names.OUTPUT_MASKS.values())
    for stack in ("", names.ENCODER, names.DECODER):
        spelled |= {names.in_stack(name, stack) for name in set(spelled)}
        spelled |= {
            names.stack_input(name, stack)
            for name in (names.TOKEN_IDS, names.SEGMENT_IDS, names.PADDING_MASK) if stack
        }
        spelled |= {names.relative_position(stack), names.embedding_mask() if not stack
                    else names.in_stack(names.embedding_mask(), stack)}
        for index in (None, *range(layers)):
            for layer in (
                names.attention(index, stack), names.cross_attention(index, stack),
                names.feed_forward(index, stack), names.gated_attention_unit(index),
            ):
                spelled |= {
                    layer, names.norm(layer), names.norm(layer, 0), names.norm(layer, 1),
                    names.post_norm(layer), names.dropout(layer), names.add(layer),
                }
    for stream in ("", names.QUERY_STREAM):
        spelled |= {names.embedding_add(stream), names.embedding_mask(stream)}
    return spelled


def test_layer_names_hold_every_name_the_template_builds():
    spelled = spelled_names(CONFIG["num_hidden_layers"])
    unknown = {}
    for variant, variant_class in sorted(VARIANTS.items()):
        config = dict(CONFIG, **test_variants.VARIANT_FIELDS.get(variant, {}))
        for application in variant_class.applications:
            model = keras_attn.build_transformer_model(
                config, variant=variant, application=application
            )
            for layer in model.layers:
                if layer.name not in spelled:
                    unknown.setdefault(layer.name, f"{variant}/{application}")
    assert not unknown, unknown
    # The names are what the tables map onto: no table path outside them.
    block = re.compile(r"\{layer[^}]*\}")
    from keras_attn.checkpoints import families

    for family in families.FAMILIES.values():
        for tables in family.name_tables.values():
            for table in tables.values() if isinstance(tables, dict) else (tables,):
                layers = {block.sub("0", path.split("/")[0]) for path in table.entries}
                assert layers <= spelled, (family.name, sorted(layers - spelled))
