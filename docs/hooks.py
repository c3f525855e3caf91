"""MkDocs hooks: the examples' plots, which live in examples/results/ where
the examples write them, are published with the site.

A page links a plot as `../examples/results/NAME.png`, the path that works
when GitHub renders docs/*.md; the site gets a copy at `results/NAME.png`
and the page's link is rewritten to it.
"""

import pathlib
import re

from mkdocs.structure.files import File

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "examples" / "results"
LINK = re.compile(r"\]\(\.\./examples/results/([\w.-]+\.png)\)")


def on_files(files, config):
    for plot in sorted(RESULTS.glob("*.png")):
        files.append(
            File(
                f"results/{plot.name}",
                src_dir=str(RESULTS.parent),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown, page, config, files):
    # Pages live at the top of docs/, so `results/` is relative to them.
    return LINK.sub(r"](results/\1)", markdown)
