"""docs/variants.md, "What each variant computes": a section per
registered variant listing its resolved traits (`Transformer.traits()`).

    KERAS_BACKEND=jax .venv/bin/python -m keras_attn.models.variants_page > docs/variants.md

rewrites the page; tests/models/test_variant_traits.py fails when the
committed page differs from what the registry gives.
"""

from keras_attn.models.variants import VARIANTS

PAGE_HEADER = """# What each variant computes

A variant is a `keras_attn.Transformer` subclass that states its traits as
class attributes, which the template's hooks read; a method of its own
(listed under "hooks it overrides") computes what no trait states. Below,
every registered variant's traits as resolved on its class; a value in bold
differs from the template's (BERT's). Generated from the registry by
`KERAS_BACKEND=jax .venv/bin/python -m keras_attn.models.variants_page`, and
checked against it by tests/models/test_variant_traits.py.

The traits:

| trait | what it states |
| --- | --- |
"""



def _markdown(value):
    if isinstance(value, type):
        return f"`{value.__name__}`"
    if isinstance(value, (tuple, list)):
        return ", ".join(_markdown(item) for item in value) or "none"
    return f"`{value}`"


def _summary(variant_class):
    """The first paragraph of the class's own docstring, on one line."""
    paragraph = (variant_class.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def variants_page():
    """docs/variants.md: a section per registered variant, its traits."""
    from keras_attn.models.traits import TRAITS
    from keras_attn.models.transformer import Transformer

    lines = [PAGE_HEADER.rstrip("\n")]
    lines += [f"| `{trait}` | {meaning} |" for trait, meaning in TRAITS.items()]
    template = Transformer.traits()
    for name, variant_class in VARIANTS.items():
        resolved = variant_class.traits()
        hooks = resolved.pop("overridden_hooks")
        lines += [
            "",
            f"## {name}",
            "",
            f"`{variant_class.__module__}.{variant_class.__qualname__}`: "
            f"{_summary(variant_class)}",
            "",
            "| trait | value |",
            "| --- | --- |",
        ]
        for trait, value in resolved.items():
            shown = _markdown(value)
            if trait not in template or template[trait] != value:
                shown = f"**{shown}**"
            lines.append(f"| `{trait}` | {shown} |")
        lines.append(f"| hooks it overrides | {_markdown(hooks)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import keras_attn  # noqa: F401  (importing it registers every built-in variant)

    print(variants_page(), end="")
