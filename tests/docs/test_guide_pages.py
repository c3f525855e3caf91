"""What the guide pages promise a reader, checked against the code: the
builder's documented signature is the real one, and each guide page opens
with its common task in a few lines of code and what they print."""

import inspect
import pathlib
import re

import pytest

import keras_attn

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def test_the_documented_builder_signature_is_the_real_one():
    """docs/builder.md's signature lacked `skip_missing`, `prefix` and four
    more arguments."""
    text = (DOCS / "builder.md").read_text()
    documented = re.search(r"```text\nbuild_transformer_model\((.*?)\n\)\n```", text, re.S).group(1)
    documented = " ".join(documented.split()).replace("\"", "'")
    real = str(inspect.signature(keras_attn.build_transformer_model))[1:-1]
    assert documented.rstrip(",") == real
    table = text[text.index(documented[:20]):]
    for name in inspect.signature(keras_attn.build_transformer_model).parameters:
        assert f"`{name}`" in table or f"`**{name}`" in table, name


# Each guide page and the task it opens with.
GUIDES = {
    "builder.md": "build_transformer_model",
    "fine-tuning.md": ".fit(",
    "generation.md": ".generate(",
}


@pytest.mark.parametrize("page", sorted(GUIDES))
def test_guide_pages_lead_with_the_common_task_and_its_output(page):
    """The first block of each guide page is the common task in a few lines
    (at most 20), followed by what it prints, before any list of details."""
    text = (DOCS / page).read_text()
    first_list = re.search(r"^- ", text, re.M)
    head = text[: first_list.start()] if first_list else text
    blocks = re.findall(r"```(\w+)\n(.*?)```", head, re.S)
    assert blocks, f"{page} opens with no code block"
    (language, code), *rest = blocks
    assert language == "python" and GUIDES[page] in code, page
    assert len(code.strip().splitlines()) <= 20, page
    assert rest and rest[0][0] == "text", f"{page}: the first block's output does not follow it"


def test_the_home_page_lists_what_the_readme_lists():
    """docs/index.md listed the BERT family and two tokenizers only, long
    after the README named every family: the feature list and family
    tables are the README's."""
    readme = (DOCS.parent / "README.md").read_text()
    home = (DOCS / "index.md").read_text()

    def features(text):
        start = text.index("- **Decoupled `key_size`**")
        # The README links docs/PAGE.md, the home page its neighbour PAGE.md.
        return re.sub(r"\(docs/", "(", text[start : text.index("## Quickstart")])

    assert features(home) == features(readme)


def test_the_home_page_gives_the_readme_s_commands():
    """The quickstart and installing sections, with their commands, are the
    README's on the home page too (the README's `### Installing` is a
    section of its own there)."""
    readme = (DOCS.parent / "README.md").read_text()
    home = (DOCS / "index.md").read_text()
    readme_part = readme[readme.index("## Quickstart") : readme.index("## A tour")]
    home_part = home[home.index("## Quickstart") : home.index("## Where to go next")]
    assert home_part == readme_part.replace("### Installing", "## Installing").replace("](docs/", "](")
