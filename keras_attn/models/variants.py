"""The table of registered variants: name -> `Transformer` subclass.

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
