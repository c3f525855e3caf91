"""The checkpoint families (keras_attn/checkpoints/families/): every
declaration is complete, the one list `BUILT_IN_NAMES` reaches every
declaration and every variant module, a family declared in a test alone
loads its own checkpoints, and the name-marker hints are those of the list
the declarations replaced."""

import json
import pathlib
import re

import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints import families
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.porting import checkpoint_free_paths
from keras_attn.checkpoints.porting import port_weights
from keras_attn.checkpoints.readers import CheckpointError
from keras_attn.checkpoints.readers import CheckpointReader
from keras_attn.checkpoints.source import Source
from keras_attn.models import VARIANTS
from keras_attn.models.bert import Bert
from keras_attn.models.config_files import load_config
from keras_attn.models.registry import built_in_variant_modules
from tests.models import test_variants

# The model harness's tiny config (width 16), with two layers.
CONFIG = dict(test_variants.CONFIG, vocab_size=60, num_hidden_layers=2)
# The registries as collected (a test's own registrations leave them again).
DECLARED = dict(families.FAMILIES)
REGISTERED = dict(VARIANTS)


def variants_of(family):
    return [name for name, cls in REGISTERED.items() if cls.checkpoint_family == family]


# Configs each `model_type` comes with, and the variant `variant=None` builds.
MODEL_TYPE_CONFIGS = [
    (model_type, overrides, expected)
    for model_type in families.model_types()
    for overrides, expected in {
        "t5": [({}, "t5"), ({"tie_word_embeddings": False}, "t5.1.1"),
               ({"is_encoder_decoder": False}, "t5_encoder")],
        "mt5": [({}, "t5.1.1"), ({"is_encoder_decoder": False}, "t5_encoder")],
        "bert": [({}, "bert"), ({"embedding_size": 12}, "roberta+")],
    }.get(model_type, [({}, families.model_types()[model_type])])
]


@pytest.mark.parametrize(
    "model_type, overrides, expected", MODEL_TYPE_CONFIGS,
    ids=[f"{m}-{e}" for m, _, e in MODEL_TYPE_CONFIGS],
)
def test_every_model_type_defaults_to_a_registered_variant_of_its_family(
    model_type, overrides, expected
):
    config = load_config(dict(CONFIG, model_type=model_type, **overrides))
    family = families.for_model_type(model_type)
    assert config.checkpoint_family == family.name
    variant = families.default_variant(config)
    assert variant == expected
    assert variant in REGISTERED
    assert REGISTERED[variant].checkpoint_family == family.name


@pytest.mark.parametrize("family", DECLARED)
def test_every_family_is_read_by_a_variant_and_has_a_name_table(family):
    assert variants_of(family), f"no registered variant reads {family} checkpoints"
    assert DECLARED[family].name_tables, f"{family} declares no name table"


class NoWeights(CheckpointReader):
    """A checkpoint holding nothing: loading from it lists every model
    variable, as not found or as one the table has no name for."""

    def __init__(self, format):
        super().__init__("no-weights")
        self.format = format

    def names(self):
        return []

    def __contains__(self, name):
        return False


def tables_for(family, application):
    """`(format, table)` of each distinct name table `family` reads an
    `application` model from."""
    tables = []
    for format, table in DECLARED[family].name_tables.items():
        if isinstance(table, dict):
            # One table per application (ELECTRA's Google generator and
            # discriminator); others are not stored under that format.
            if application not in table:
                continue
            table = table[application]
        if all(table is not other for _, other in tables):
            tables.append((format, table))
    return tables


COVERAGE = [
    (family, variant, application)
    for family in DECLARED
    for variant in variants_of(family)
    for application in REGISTERED[variant].applications
]


@pytest.mark.parametrize(
    "family, variant, application", COVERAGE, ids=["-".join(case) for case in COVERAGE]
)
def test_every_model_weight_has_a_name_in_each_of_its_familys_tables(family, variant, application):
    tables = tables_for(family, application)
    if not tables:
        pytest.skip(f"no {family} format stores {application!r} models")
    config = dict(CONFIG, **test_variants.VARIANT_FIELDS.get(variant, {}))
    model = keras_attn.build_transformer_model(config, variant=variant, application=application)
    for format, table in tables:
        with pytest.raises(CheckpointError) as raised:
            port_weights(model, NoWeights(format), table)
        assert "has no name for" not in str(raised.value), (format, str(raised.value))


# The list the declarations' markers replaced (keras_attn/checkpoints/porting.py
# before the families): (substring, family, variants), tried in this order.
MARKERS_BEFORE = (
    ("EncDecAttention", "T5", "'t5', 't5.1.1' or 'mt5.1.1'"),
    ("attn.c_attn", "GPT-2", "'gpt2'"),
    ("newslm/", "GPT2-ML", "'gpt2_ml'"),
    ("discriminator_predictions", "ELECTRA", "'electra'"),
    # Added with DeBERTa-v2 (issue 52, item 3): before BERT's, which
    # `deberta.encoder.layer.` contains.
    ("attention.self.query_proj", "DeBERTa-v2", "'deberta_v2'"),
    ("bert.encoder.layer.", "BERT", "'bert'"),
    ("roformer.encoder.layer.", "RoFormer", "'roformer'"),
    ("encoder.layer.", "BERT", "'bert' or 'roberta'"),
    ("bert/encoder/layer_", "BERT", "'bert'"),
    # Added with the LLaMA-layout families (issue 32).
    ("self_attn.q_norm", "Qwen3", "'qwen3'"),
    # Added with Gemma 2 and 3 (issue 52, item 1).
    ("pre_feedforward_layernorm", "Gemma 2", "'gemma2' or 'gemma3'"),
    # Added with Phi-3 (issue 52, item 2).
    ("self_attn.qkv_proj", "Phi-3", "'phi3'"),
    ("self_attn.q_proj", "LLaMA", "'llama', 'mistral', 'qwen2' or 'qwen3'"),
    # Added with ModernBERT (issue 32, item 4).
    ("attn.Wqkv", "ModernBERT", "'modernbert'"),
)


def first_marker(stored, own, markers):
    return next(
        (
            (substring, family, variants)
            for substring, family, variants in markers
            if substring not in own and any(substring in name for name in stored)
        ),
        None,
    )


def declared_tables():
    tables = []
    for family in DECLARED.values():
        for table in family.name_tables.values():
            for table in table.values() if isinstance(table, dict) else (table,):
                if all(table is not other for other in tables):
                    tables.append(table)
    return tables


def stored_names(table):
    """The names a checkpoint of `table`'s format stores (block 0), once per
    task-model prefix the format has."""
    names = [source.names[0].format(layer=0) for source in table.entries.values()]
    return [{prefix + name for name in names} for prefix in table.prefixes]


def test_the_markers_are_those_before_and_give_the_same_hints():
    declared = [
        (marker.substring, family.title, marker.variants) for family, marker in families.markers()
    ]
    assert sorted(declared) == sorted(MARKERS_BEFORE)
    tables = declared_tables()
    for own_table in tables:
        own = " ".join(
            spelling
            for source in own_table.entries.values()
            for name in source.names
            for spelling in own_table.candidates(name)
        )
        for stored_table in tables:
            for stored in stored_names(stored_table):
                assert first_marker(stored, own, declared) == first_marker(
                    stored, own, MARKERS_BEFORE
                ), sorted(stored)[:5]


# A family of its own: a model stored under its Keras variable paths, each
# behind `toy.`, with `model_type: toy-bert`.
def toy_table(model):
    templates = {re.sub(r"^Transformer-\d+-", "Transformer-{layer}-", w.path) for w in model.weights}
    return NameTable(entries={template: Source(f"toy.{template}") for template in sorted(templates)})


@pytest.fixture
def registries():
    """The family and variant registries, restored when the test ends."""
    declared, registered = dict(families.FAMILIES), dict(VARIANTS)
    try:
        yield
    finally:
        families.FAMILIES.clear()
        families.FAMILIES.update(declared)
        VARIANTS.clear()
        VARIANTS.update(registered)


def test_a_family_declared_in_a_test_loads_its_checkpoints(registries, tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    source = keras_attn.build_transformer_model(CONFIG, variant="bert", application="mlm")
    for weight in source.weights:
        weight.assign(np.random.default_rng(0).normal(size=weight.shape).astype("float32") * 0.1)
    families.register_family(families.CheckpointFamily(
        name="toy_bert",
        title="Toy BERT",
        description="BERT's layout under its Keras names, behind `toy.`",
        model_types=("toy-bert",),
        default_variant="toy_bert",
        name_tables={"safetensors": toy_table(source)},
    ))

    @keras_attn.register_variant("toy_bert")
    class ToyBert(Bert):
        checkpoint_family = "toy_bert"

    assert checkpoint_free_paths(source) == set()
    safetensors_numpy.save_file(
        {f"toy.{w.path}": np.asarray(w.numpy()) for w in source.weights},
        str(tmp_path / "model.safetensors"),
    )
    (tmp_path / "config.json").write_text(json.dumps(dict(CONFIG, model_type="toy-bert")))

    loaded = keras_attn.build_transformer_model(str(tmp_path), application="mlm")

    assert type(loaded.template) is ToyBert
    ids = np.array([[5, 9, 12, 7, 0, 0]], "int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids)}
    np.testing.assert_allclose(
        np.asarray(loaded.predict(inputs, verbose=0)),
        np.asarray(source.predict(inputs, verbose=0)),
        atol=1e-6,
    )


def test_the_registry_holds_the_built_in_list_in_its_order():
    assert tuple(family.name for family in families.BUILT_IN) == families.BUILT_IN_NAMES
    assert tuple(DECLARED.values())[: len(families.BUILT_IN)] == families.BUILT_IN
    assert families.names()[: len(families.BUILT_IN)] == families.BUILT_IN_NAMES
    for name in families.BUILT_IN_NAMES:
        assert getattr(families, name.upper()) is families.get(name)


FAMILIES_FOLDER = pathlib.Path(families.__file__).parent
MODELS_FOLDER = pathlib.Path(keras_attn.models.__file__).parent
# A module-level `@register_variant(...)` or `register_variant(...)`.
REGISTERS_A_VARIANT = re.compile(r"^@?register_variant\(", re.MULTILINE)


def test_every_declaration_is_registered_from_the_one_list():
    declarations = {path.stem for path in FAMILIES_FOLDER.glob("*.py")} - {"__init__", "family"}
    assert len(set(families.BUILT_IN_NAMES)) == len(families.BUILT_IN_NAMES)
    assert declarations - set(families.BUILT_IN_NAMES) == set(), "not in BUILT_IN_NAMES"
    assert set(families.BUILT_IN_NAMES) - declarations == set(), "no such declaration module"


def test_every_variant_module_is_imported_from_the_one_list():
    """Each module of keras_attn/models/ that registers a variant is named
    once: by its family's declaration (`variant_modules`) or by
    `VARIANT_MODULES_WITHOUT_FAMILY`."""
    registering = {
        path.stem for path in MODELS_FOLDER.glob("*.py")
        if REGISTERS_A_VARIANT.search(path.read_text(encoding="utf-8"))
    }
    listed = built_in_variant_modules()
    assert len(set(listed)) == len(listed), f"a module is listed twice: {listed}"
    assert registering - set(listed) == set(), (
        "not named by a family's variant_modules nor by VARIANT_MODULES_WITHOUT_FAMILY"
    )
    assert set(listed) - registering == set(), "a listed module registers no variant"
    built_in = [cls for cls in REGISTERED.values() if cls.__module__.startswith("keras_attn.")]
    assert {cls.__module__ for cls in built_in} == {f"keras_attn.models.{m}" for m in listed}
    for cls in built_in:
        assert getattr(keras_attn.models, cls.__name__) is cls, f"keras_attn.models.{cls.__name__}"


@pytest.mark.parametrize("family", families.BUILT_IN_NAMES)
def test_a_familys_variant_modules_register_its_own_variants(family):
    modules = families.get(family).variant_modules
    assert modules, f"{family} names no variant module"
    for module in modules:
        registered = [
            cls for cls in REGISTERED.values() if cls.__module__ == f"keras_attn.models.{module}"
        ]
        assert registered, f"keras_attn/models/{module}.py registers no variant"
        for cls in registered:
            assert cls.checkpoint_family == family, (module, cls.__name__)


# A Google-format config that two families' `recognises_config` claim
# (ALBERT's `num_hidden_groups`, NEZHA's `use_relative_position`).
CLAIMED_TWICE = {"num_hidden_groups": 1, "use_relative_position": True}


def test_the_priority_list_decides_which_family_recognises_a_config(registries):
    assert families.recognise_config(CLAIMED_TWICE) == "albert"
    families.FAMILIES.clear()
    for family in reversed(families.BUILT_IN):
        families.register_family(family)
    assert families.recognise_config(CLAIMED_TWICE) == "nezha"


def test_the_order_of_importing_the_declarations_changes_nothing():
    """The declarations' modules, imported in reverse order before the
    package, register nothing of their own: the registry is `BUILT_IN`'s."""
    import subprocess
    import sys

    reversed_imports = "; ".join(
        f"import keras_attn.checkpoints.families.{name}"
        for name in reversed(["bert", "roberta", "albert", "nezha", "llama", "qwen2", "qwen3"])
    )
    script = (
        f"{reversed_imports}; from keras_attn.checkpoints import families; "
        "print(' '.join(families.names())); "
        f"print(families.recognise_config({CLAIMED_TWICE!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    order, recognised = result.stdout.split("\n")[-3:-1]
    assert order.split() == [family.name for family in families.BUILT_IN]
    assert recognised == "albert"


# The map `keras-attn-convert` kept before the declarations held it.
ARCHITECTURE_APPLICATIONS_BEFORE = {
    "ElectraForPreTraining": "discriminator",
    "ElectraForMaskedLM": "mlm",
    "ModernBertForMaskedLM": "mlm",
    "DebertaV2ForMaskedLM": "mlm",
}


def test_the_declarations_say_which_application_holds_a_classs_head():
    for architecture, application in ARCHITECTURE_APPLICATIONS_BEFORE.items():
        assert families.application_for_architecture(architecture) == application
    assert families.application_for_architecture("BertForMaskedLM") is None
    for family in DECLARED.values():
        for application in family.architecture_applications.values():
            assert any(
                application in REGISTERED[variant].applications
                for variant in variants_of(family.name)
            ), (family.name, application)


def test_the_converters_old_map_is_deprecated_and_the_same():
    from keras_attn import convert

    with pytest.warns(DeprecationWarning, match="architecture_applications"):
        assert convert.ARCHITECTURE_APPLICATIONS == ARCHITECTURE_APPLICATIONS_BEFORE
