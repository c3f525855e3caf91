"""The variant registry: the names `build_transformer_model(variant=...)`
accepts, each bound to a `Transformer` subclass.

Every built-in variant module registers itself with `@register_variant`, and
`keras_attn.models` imports them all (`import_built_in_variants`), so the
registry is complete as soon as `keras_attn` is imported. Which modules those
are is not listed here: a built-in family's declaration names its own
(`CheckpointFamily.variant_modules`), and `VARIANT_MODULES_WITHOUT_FAMILY`
names the rest.
"""

import importlib

from keras_attn.checkpoints import families
from keras_attn.models.transformer import APPLICATIONS
from keras_attn.models.traits import TRAIT_CHOICES
from keras_attn.models.transformer import Transformer
from keras_attn.models.variants import VARIANTS


# The modules of variants that read the checkpoints of a family declared for
# other variants (BERT's, RoFormer's): attention, position and head changes
# studied on those checkpoints. They are imported after every family's own.
VARIANT_MODULES_WITHOUT_FAMILY = (
    "roberta_plus", "talking_heads", "tta", "sinusoidal", "alibi", "kerple", "sandwich",
    "xpos",
)


def built_in_variant_modules():
    """The names of the built-in variant modules under `keras_attn.models`:
    every built-in family's `variant_modules`, in the order of priority
    (`families.BUILT_IN_NAMES`), then `VARIANT_MODULES_WITHOUT_FAMILY`."""
    declared = [module for family in families.BUILT_IN for module in family.variant_modules]
    return tuple(declared) + VARIANT_MODULES_WITHOUT_FAMILY


def import_built_in_variants():
    """Imports every built-in variant module, which registers its variants,
    and returns the classes registered, in the order they were (the
    registry's order)."""
    modules = [f"keras_attn.models.{name}" for name in built_in_variant_modules()]
    for module in modules:
        importlib.import_module(module)
    return [cls for cls in VARIANTS.values() if cls.__module__ in modules]


def register_variant(name, variant_class=None):
    """Makes `build_transformer_model(variant=name)` build `variant_class`.

    Use it as a class decorator, `@register_variant("my_bert")`, or call it
    as `register_variant("my_bert", MyBert)`; either returns the class. The
    class's `checkpoint_family` (`"bert"` unless it names another family
    declared in `keras_attn.checkpoints.families`) decides which checkpoints
    it reads, its `applications` which `application=` it builds.

    Args:
        name: the `variant=` name, a non-empty string.
        variant_class: a subclass of `keras_attn.Transformer`; omitted, a
            decorator is returned.

    Returns:
        `variant_class`, or a decorator registering and returning a class.

    Raises:
        ValueError: `name` is not a non-empty string, or is already taken by
            a different class (redefining the same class, e.g. re-running a
            notebook cell, replaces it).
        TypeError: `variant_class` is not a `Transformer` subclass, or its
            `applications`, `checkpoint_family` or a trait of
            `TRAIT_CHOICES` (`norm`, `head`, ...) is not one the builder
            knows.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_variant: `name` must be a non-empty string; received {name!r}.")

    def register(variant_class):
        if not (isinstance(variant_class, type) and issubclass(variant_class, Transformer)):
            raise TypeError(
                f"register_variant({name!r}): the variant must be a subclass of "
                f"keras_attn.Transformer; received {variant_class!r}."
            )
        declared = sorted(families.names())
        if variant_class.checkpoint_family not in declared:
            raise TypeError(
                f"register_variant({name!r}): {variant_class.__name__}.checkpoint_family "
                f"must be one of {declared}; it is {variant_class.checkpoint_family!r}."
            )
        unknown = [a for a in variant_class.applications if a not in APPLICATIONS]
        if not variant_class.applications or unknown:
            raise TypeError(
                f"register_variant({name!r}): {variant_class.__name__}.applications "
                f"must be a non-empty tuple of {sorted(APPLICATIONS)}; it is "
                f"{variant_class.applications!r}."
            )
        for trait, choices in TRAIT_CHOICES.items():
            if getattr(variant_class, trait) not in choices:
                raise TypeError(
                    f"register_variant({name!r}): {variant_class.__name__}.{trait} must be "
                    f"one of {list(choices)}; it is {getattr(variant_class, trait)!r}."
                )
        known = VARIANTS.get(name)
        if known is not None and _qualified_name(known) != _qualified_name(variant_class):
            raise ValueError(
                f"register_variant: variant {name!r} is already registered to "
                f"{_qualified_name(known)}; choose another name for "
                f"{_qualified_name(variant_class)}."
            )
        VARIANTS[name] = variant_class
        return variant_class

    if variant_class is None:
        return register
    return register(variant_class)


def _qualified_name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"

