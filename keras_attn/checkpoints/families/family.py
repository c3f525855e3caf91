"""`CheckpointFamily`: everything the library knows about one way of storing
a model (its `model_type`s, config spellings and defaults, default variant,
name tables, name markers and `transformers` references), and the registry
every other module looks families up in.

A declaration names variants by string only: this floor is below
`keras_attn.models`, which imports it.
"""

import dataclasses
from typing import Callable
from typing import Mapping

# The family a Google-format config (a `bert_config.json`, no `model_type`)
# is read as; the variants of every `google_format` family read it.
GOOGLE_CONFIG_FAMILY = "bert"


# How surely a marker's names are its family's, in the order the hint
# tries them: names of layers only the family has (T5's `EncDecAttention`,
# ELECTRA's discriminator head); block names several families share, behind
# the family's own prefix (`bert.encoder.layer.`); block names several
# families store alike (`encoder.layer.`).
MARKER_KINDS = ("own", "prefixed", "shared")


@dataclasses.dataclass(frozen=True)
class Marker:
    """A substring of checkpoint names that reveals `CheckpointFamily`'s
    checkpoints: a load refused by another family's table says which
    variant(s) to build instead (`variants`, as the hint writes them,
    `"'bert' or 'roberta'"`). `kind` is one of `MARKER_KINDS`."""

    substring: str
    variants: str
    kind: str = "own"


@dataclasses.dataclass(frozen=True)
class CheckpointFamily:
    """One checkpoint family, declared once (see `register_family`).

    Attributes:
        name: the family's name, which a variant's `checkpoint_family` and a
            config's `checkpoint_family` give.
        title: how messages name it (`"GPT-2"`).
        description: how its checkpoints store their weights.
        model_types: the Hugging Face `model_type`s read as this family.
        google_format: whether its variants read a Google-format config
            (no `model_type`: read as `GOOGLE_CONFIG_FAMILY`), as
            bert4keras's checkpoints of it come with one.
        recognises_config: for a config without `model_type`, whether fields
            only this family's configs have say it is one (ALBERT's
            `num_hidden_groups`); None: never.
        config_aliases: its configs' own spellings of fields (transformers'
            `attribute_map`: `n_embd` -> `hidden_size`), read before the
            common ones; a key aliased here is no longer a required value.
        prepare_config: `(values, model_type) -> values`, applied to its
            configs before any field is read (T5's head, by version).
        config_defaults: `(fields) -> None`, filling the fields its configs
            leave out at the end of normalisation (GPT-2's
            `intermediate_size` of `4 * hidden_size`).
        required_values: keys only its configs hold, with the one value
            this builder reads.
        ignored_keys: keys only its configs hold that do not change the
            network (task heads' options, generation settings).
        default_variant: the variant `variant=None` builds: a name, a
            function of the `TransformerConfig`, or None for the Google
            config family's choice.
        variant_mismatch: `(config, variant_class) -> str | None`: why a
            variant of the family cannot read this config (a T5 head tied
            otherwise than the config says), or None.
        name_tables: reader format (`"tensorflow"`, `"safetensors"`,
            `"torch"`) -> `NameTable` (see `name_tables`), or a dict of them
            by application, where one checkpoint stores several models
            (ELECTRA's generator and discriminator).
        markers: `Marker`s of names only its checkpoints store.
        references: application -> `(transformers class, output field)`
            that `keras-attn-convert` compares a Hugging Face source with.
        reference_overrides: application -> `model_type` -> the class read
            instead (mT5's `MT5EncoderModel`).
        architecture_applications: Hugging Face class (a config's
            `architectures`) -> the application holding its head, where that
            is not the variant's first (`ElectraForPreTraining`:
            `"discriminator"`); `keras-attn-convert` converts such a folder
            with its head.
        variant_modules: the modules of `keras_attn.models` that define the
            family's own variants (`("t5",)`; ALBERT's `("albert",
            "albert_unshared")`), by name: importing `keras_attn.models`
            imports those of every built-in family, which registers their
            variants.
    """

    name: str
    title: str
    description: str
    model_types: tuple = ()
    google_format: bool = False
    recognises_config: Callable | None = None
    config_aliases: Mapping = dataclasses.field(default_factory=dict)
    prepare_config: Callable | None = None
    config_defaults: Callable | None = None
    required_values: Mapping = dataclasses.field(default_factory=dict)
    ignored_keys: frozenset = frozenset()
    default_variant: str | Callable | None = None
    variant_mismatch: Callable | None = None
    name_tables: Mapping = dataclasses.field(default_factory=dict)
    markers: tuple = ()
    references: Mapping = dataclasses.field(default_factory=dict)
    reference_overrides: Mapping = dataclasses.field(default_factory=dict)
    architecture_applications: Mapping = dataclasses.field(default_factory=dict)
    variant_modules: tuple = ()


def name_tables(huggingface=None, tensorflow=None):
    """The `name_tables` of a family whose Hugging Face checkpoints
    (safetensors or PyTorch) the `NameTable` `huggingface` reads and whose
    TensorFlow ones `tensorflow` reads (a `NameTable`, or a dict of them by
    application)."""
    tables = {} if tensorflow is None else {"tensorflow": tensorflow}
    if huggingface is not None:
        tables.update(safetensors=huggingface, torch=huggingface)
    return tables


# What `keras-attn-convert` compares an encoder and a causal language model
# with (`references`).
ENCODER_REFERENCE = {"encoder": ("AutoModel", "last_hidden_state")}
LM_REFERENCE = {"lm": ("AutoModelForCausalLM", "logits")}
MLM_REFERENCE = {"mlm": ("AutoModelForMaskedLM", "logits")}


def set_defaults(values):
    """A `config_defaults` that gives each field of the dict `values` to a
    config that leaves it out."""

    def config_defaults(fields):
        for key, value in values.items():
            fields.setdefault(key, value)

    return config_defaults


# Family name -> `CheckpointFamily`, in registration order, which is the
# order of priority: `keras_attn.checkpoints.families` registers the
# built-in families from one list of names, `BUILT_IN_NAMES`.
FAMILIES = {}


def register_family(family):
    """Adds `family` (a `CheckpointFamily`) to the registry, after every
    family registered before it in priority (the built-in ones are
    `keras_attn.checkpoints.families.BUILT_IN`, registered from the list
    `BUILT_IN_NAMES`), and returns it.

    Raises:
        TypeError: `family` is not a `CheckpointFamily`.
        ValueError: its name, or one of its `model_types`, is already another
            family's (an equal declaration again is accepted).
    """
    if not isinstance(family, CheckpointFamily):
        raise TypeError(f"register_family: expected a CheckpointFamily; received {family!r}.")
    if not isinstance(family.name, str) or not family.name:
        raise ValueError(f"register_family: `name` must be a non-empty string; received {family.name!r}.")
    known = FAMILIES.get(family.name)
    if known is not None and known != family:
        raise ValueError(
            f"register_family: family {family.name!r} is already declared; choose another name."
        )
    for marker in family.markers:
        if marker.kind not in MARKER_KINDS:
            raise ValueError(
                f"register_family({family.name!r}): marker {marker.substring!r} has kind "
                f"{marker.kind!r}; the kinds are {list(MARKER_KINDS)}."
            )
    for model_type in family.model_types:
        owner = for_model_type(model_type)
        if owner is not None and owner.name != family.name:
            raise ValueError(
                f"register_family({family.name!r}): model_type {model_type!r} is already "
                f"read as family {owner.name!r}."
            )
    FAMILIES[family.name] = family
    return family


def get(name):
    """The family named `name`, or None."""
    return FAMILIES.get(name)


def names():
    """The registered families' names, in registration order."""
    return tuple(FAMILIES)


def model_types():
    """Hugging Face `model_type` -> the name of the family read for it."""
    return {
        model_type: family.name
        for family in FAMILIES.values()
        for model_type in family.model_types
    }


def for_model_type(model_type):
    """The family a Hugging Face `model_type` is read as, or None."""
    return next(
        (family for family in FAMILIES.values() if model_type in family.model_types), None
    )


def recognise_config(values):
    """The name of the first family, by priority, whose `recognises_config`
    claims a config's raw `values`, or None."""
    return next(
        (
            family.name
            for family in FAMILIES.values()
            if family.recognises_config is not None and family.recognises_config(values)
        ),
        None,
    )


def readable_families(config_family):
    """The families whose variants may read a config of `config_family`: the
    `google_format` ones for a Google-format config, else itself."""
    if config_family == GOOGLE_CONFIG_FAMILY:
        return tuple(family.name for family in FAMILIES.values() if family.google_format)
    return (config_family,)


def default_variant(config):
    """The variant `build_transformer_model(variant=None)` builds for a
    `TransformerConfig`: its family's `default_variant`, else the Google
    config family's."""
    family = FAMILIES.get(config.checkpoint_family)
    if family is None or family.default_variant is None:
        family = FAMILIES[GOOGLE_CONFIG_FAMILY]
    chosen = family.default_variant
    return chosen(config) if callable(chosen) else chosen


def variant_mismatch(config, variant_class):
    """Why `variant_class` cannot read a `TransformerConfig` although it
    reads the config's family (the family's `variant_mismatch`), or None."""
    family = FAMILIES.get(config.checkpoint_family)
    if family is None or family.variant_mismatch is None:
        return None
    return family.variant_mismatch(config, variant_class)


def markers():
    """`(family, marker)` for every declared marker, in the order the hint
    tries them: by `MARKER_KINDS`, then by priority."""
    pairs = [(family, marker) for family in FAMILIES.values() for marker in family.markers]
    return sorted(pairs, key=lambda pair: MARKER_KINDS.index(pair[1].kind))


def application_for_architecture(architecture):
    """The application holding the head of the Hugging Face class
    `architecture` where a family declares one (`architecture_applications`),
    else None."""
    return next(
        (
            family.architecture_applications[architecture]
            for family in FAMILIES.values()
            if architecture in family.architecture_applications
        ),
        None,
    )
