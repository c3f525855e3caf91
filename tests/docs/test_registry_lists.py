"""The variants and applications the documentation lists are the
registry's: `build_transformer_model`'s docstring and docs/builder.md
listed 15 of 30 variants and no `"discriminator"` long after they were
registered."""

import re

import keras_attn
from tests.docs import registry_lists

# A quoted name in backquotes, as the docstring and the argument table
# write a value: `"roberta+"`.
QUOTED = re.compile(r'`"([^"`]+)"`')


def docstring_section(docstring, argument, next_argument):
    """The text of `argument`'s entry in a Google-style Args section."""
    start = docstring.index(f"\n        {argument}: ")
    return docstring[start : docstring.index(f"\n        {next_argument}: ", start)]


def argument_row(page_text, argument):
    """The row of docs/builder.md's argument table for `argument`."""
    return re.search(rf"^\| `{argument}` \|.*$", page_text, re.M).group(0)


def test_the_builder_docstring_lists_every_variant_and_application():
    docstring = keras_attn.build_transformer_model.__doc__
    variants = set(QUOTED.findall(docstring_section(docstring, "variant", "application")))
    assert variants == set(registry_lists.registered_variants()), (
        "build_transformer_model's docstring, `variant`: missing "
        f"{sorted(set(registry_lists.registered_variants()) - variants)}, not registered "
        f"{sorted(variants - set(registry_lists.registered_variants()))}"
    )
    applications = set(QUOTED.findall(docstring_section(docstring, "application", "with_pool")))
    assert applications == set(registry_lists.applications()), applications
    assert "BERT-family model" not in docstring.splitlines()[0]


def test_the_builder_page_lists_every_variant_and_application():
    text = registry_lists.BUILDER_PAGE.read_text(encoding="utf-8")
    assert registry_lists.documented_table(text) == registry_lists.variants_table(), (
        "docs/builder.md's table of variants is not the registry's; rewrite it with "
        "`KERAS_BACKEND=jax .venv/bin/python -m tests.docs.registry_lists`"
    )
    applications = set(QUOTED.findall(argument_row(text, "application")))
    assert applications == set(registry_lists.applications()), applications


def test_the_generated_table_has_a_row_per_variant():
    """The generator itself: one row per registered name, with its
    applications in order and bert4keras's `model=` names."""
    rows = registry_lists.variants_table().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [
        f"| `{name}`" for name in registry_lists.registered_variants()
    ]
    electra = next(row for row in rows if row.startswith("| `electra`"))
    assert "`encoder`, `discriminator`, `mlm`" in electra
    t5 = next(row for row in rows if row.startswith("| `t5` "))
    assert t5.endswith("| `t5`, `t5.1.0` |")
    # Removing a variant from the page is noticed.
    text = registry_lists.BUILDER_PAGE.read_text(encoding="utf-8")
    stale = text.replace(electra + "\n", "")
    assert registry_lists.documented_table(stale) != registry_lists.variants_table()
