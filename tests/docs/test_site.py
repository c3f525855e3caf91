"""The documentation site builds without a warning, and its API reference
covers every public name.

`mkdocs build --strict` fails on a link to a missing page or heading, a page
left out of the navigation and a docstring griffe cannot parse. The build
reads the source statically and imports no backend, so its result is the
same on every backend; it runs on each all the same, because it takes a few
seconds and a developer who tests one backend should see a broken page.
"""

import importlib
import inspect
import os
import re
import subprocess
import sys

import keras_attn
from tests.docs.doc_blocks import REPO_ROOT

API_PAGES = sorted((REPO_ROOT / "docs" / "api").glob("*.md"))
IDENTIFIER = re.compile(r"^::: (?P<identifier>[\w.]+)\s*$", re.M)


def public_names():
    """`(dotted name, object)` for every name `keras_attn.__all__` exports
    and every public name of the subpackages it exports (their `__all__`,
    or what their `__init__` imports)."""
    names = []
    for name in keras_attn.__all__:
        value = getattr(keras_attn, name)
        if not inspect.ismodule(value):
            names.append((f"keras_attn.{name}", value))
            continue
        exported = getattr(value, "__all__", None) or [
            member for member, item in vars(value).items()
            if not member.startswith("_") and not inspect.ismodule(item)
        ]
        names.extend((f"keras_attn.{name}.{member}", getattr(value, member)) for member in exported)
    return names


def resolve(identifier):
    """The object a `::: keras_attn....` identifier names, read as griffe
    reads it: the longest prefix that is a module, then attributes. So
    `keras_attn.training.adversarial_training` is the module of that name
    (which the page would render), and the function is
    `keras_attn.training.adversarial_training.adversarial_training`."""
    parts = identifier.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            value = getattr(value, part)
        return value
    raise ImportError(identifier)


def documented_identifiers():
    return {
        match.group("identifier"): page.name
        for page in API_PAGES
        for match in IDENTIFIER.finditer(page.read_text(encoding="utf-8"))
    }


def own_docstring(value):
    # A class's `__doc__` is its own (not inherited); functions likewise.
    return (value.__doc__ or "").strip()


def test_every_public_name_has_a_docstring_and_an_api_entry():
    documented = {id(resolve(identifier)) for identifier in documented_identifiers()}
    api_text = "\n".join(page.read_text(encoding="utf-8") for page in API_PAGES)
    undocumented, without_docstring = [], []
    for name, value in public_names():
        if not callable(value):
            # Values (the version string) are named in the reference's text.
            if name.rsplit(".", 1)[-1] not in api_text:
                undocumented.append(name)
            continue
        if id(value) not in documented:
            undocumented.append(name)
        if not own_docstring(value):
            without_docstring.append(name)
    assert not undocumented, (
        f"public names missing from the API reference (add `::: NAME` to a page "
        f"of docs/api/): {undocumented}"
    )
    assert not without_docstring, f"public names without a docstring: {without_docstring}"


def test_api_entries_name_public_objects_once():
    identifiers = documented_identifiers()
    public = {id(value) for _, value in public_names()}
    seen = {}
    for identifier, page in identifiers.items():
        value = resolve(identifier)
        assert id(value) in public, f"{page}: `{identifier}` is not a public name"
        assert id(value) not in seen, f"{page}: `{identifier}` is documented as `{seen.get(id(value))}` too"
        seen[id(value)] = identifier


def test_public_names_cover_subpackages():
    """The rule above reads both `__all__` and plain imports."""
    names = dict(public_names())
    assert names["keras_attn.build_transformer_model"] is keras_attn.build_transformer_model
    assert names["keras_attn.layers.ALiBiBias"] is keras_attn.layers.ALiBiBias  # no __all__
    assert names["keras_attn.samplers.get"] is keras_attn.samplers.get  # __all__
    assert not any(name.startswith("keras_attn.layers.multi_head_attention") for name in names)


def test_site_builds_with_strict_mkdocs(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site),
         "--config-file", str(REPO_ROOT / "mkdocs.yml")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        # Material prints its end-of-life notice (May 2027) on every build otherwise.
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    # The tools come with the [test] extra (and [docs]); without them this
    # fails rather than skips, so CI cannot pass without building the site.
    assert result.returncode == 0, result.stderr[-6000:]
    # Every `::: identifier` was rendered: mkdocstrings gives its heading
    # the identifier as its id.
    for identifier, page in documented_identifiers().items():
        html = (site / "api" / page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
        if page == "index.md":
            html = (site / "api" / "index.html").read_text(encoding="utf-8")
        assert f'id="{identifier}"' in html, f"{identifier} is not rendered on api/{page}"
    # The examples' plots are published with the pages that show them.
    assert (site / "results" / "length_extrapolation.png").exists()
    # Signatures are formatted on lines of their own (ruff, from the [docs]
    # extra), not one clipped line.
    models = (site / "api" / "models" / "index.html").read_text(encoding="utf-8")
    signature = models[models.index('doc-signature highlight"'):]
    signature = signature[: signature.index("</code>")]
    assert signature.count("\n") > 5, signature[:500]
    # The API reference's index page is its section's own page, not a second
    # "API reference" entry under it.
    home = (site / "index.html").read_text(encoding="utf-8")
    entries = re.findall(r'<span class="md-ellipsis">\s*API reference\s*</span>', home)
    assert len(entries) == 1, entries
    # Long code lines wrap; table cells keep identifiers whole and wide
    # tables show where they scroll.
    assert "stylesheets/code.css" in home
    assert "stylesheets/tables.css" in home
    assert (site / "stylesheets" / "tables.css").exists()


def test_doctest_examples_become_code_blocks():
    """docs/griffe_examples.py, which the API reference's build uses."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("griffe_examples", REPO_ROOT / "docs" / "griffe_examples.py")
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    docstring = "Text.\n\nExample:\n\n>>> x = f(\n...     1)\n>>> x\n2\n\nMore text.\n    >>> y = 3"
    assert extension.fenced(docstring) == (
        "Text.\n\nExample:\n\n```pycon\n>>> x = f(\n...     1)\n>>> x\n2\n```\n\nMore text.\n"
        "    ```pycon\n    >>> y = 3\n    ```"
    )


def css_rules(path):
    """`{selector: declarations}` of a small stylesheet (comments removed)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {
        " ".join(selector.split()): " ".join(body.split())
        for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", text)
    }


def test_tables_keep_identifiers_whole_and_show_that_they_scroll():
    """Material breaks code anywhere, so identifiers in table cells broke
    mid-word (`albert_unsha|red`, `ElectraForPreTrainin|g`), and a table
    wider than a phone was cut at the right edge with no sign that it
    scrolls."""
    rules = css_rules(REPO_ROOT / "docs" / "stylesheets" / "tables.css")
    cell_code = rules[".md-typeset td code"]
    assert "word-break: keep-all" in cell_code and "overflow-wrap: normal" in cell_code
    scrolling = rules[".md-typeset__scrollwrap"]
    # Covers that scroll with the table over shadows fixed to the box.
    assert "background-attachment: local, local, scroll, scroll" in scrolling
    assert "stylesheets/tables.css" in (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
