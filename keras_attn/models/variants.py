"""The table of registered variants: name -> `Transformer` subclass, and
what each computes (`traits`; docs/variants.md lists them all, see
`variants_page`).

`register_variant` (in `registry`) checks a class and writes it here; this
module imports nothing, so a model can look its variant up by name (to
rebuild its template after loading) without importing the template.
"""

# Variant name -> `Transformer` subclass, in registration order.
VARIANTS = {}


def variant_name(variant_class):
    """The name `variant_class` is registered under (None if it is not)."""
    for name, registered in VARIANTS.items():
        if registered is variant_class:
            return name
    return None


def traits(name):
    """What the variant registered as `name` computes: `{trait: value}` for
    each trait of `keras_attn.models.traits.TRAITS` its class has,
    then `"overridden_hooks"`, the template hooks it overrides.

    Raises:
        ValueError: no variant is registered as `name`.

    Example:

    >>> keras_attn.models.variants.traits("gemma2")["norm_scale_offset"]
    1.0
    """
    if name not in VARIANTS:
        raise ValueError(f"No variant is registered as {name!r}; registered: {list(VARIANTS)}.")
    return VARIANTS[name].traits()
