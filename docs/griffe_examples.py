"""Griffe extension: the docstrings' doctest-style examples as code blocks.

The docstrings write examples as `>>>` lines under a plain `Example:` line,
which Python's help() shows well but Markdown reads as nested quotes. This
wraps each run of `>>>` lines (with their `...` continuations and the output
lines after them) in a ```pycon fence when the API reference is built; the
source is unchanged.
"""

import griffe

FENCE = "```"


def fenced(text):
    lines, out, index = text.splitlines(), [], 0
    while index < len(lines):
        if not lines[index].lstrip().startswith(">>>"):
            out.append(lines[index])
            index += 1
            continue
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
        block = []
        while index < len(lines) and lines[index].strip():
            block.append(lines[index][len(indent):])
            index += 1
        out.extend([indent + FENCE + "pycon", *(indent + line for line in block), indent + FENCE])
    return "\n".join(out)


class DoctestExamples(griffe.Extension):
    def on_object(self, *, obj, **kwargs):
        if obj.docstring and ">>>" in obj.docstring.value:
            obj.docstring.value = fenced(obj.docstring.value)
