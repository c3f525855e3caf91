"""The ```python blocks of the README and docs/*.md, and running them.

A page's blocks run in order in one namespace, like a notebook, in a
working directory where `doc_files.prepare` has written the files they name.
Comments on their own line steer a page (invisible once rendered):

- `<!-- docs-test: backends jax tensorflow -->` as the last line before a
  block: the block runs on those backends only (an export format or a
  distribution API that exists on some backends only);
- `<!-- docs-test: skip REASON -->` as the last line before a block: the
  block never runs, and the test reports it;
- `<!-- docs-test: devices N -->` anywhere: on JAX the page runs in a fresh
  process with N virtual CPU devices (JAX fixes its devices when it starts).

Every fence must name its language; only `python` runs. A block that must
not run (shell commands, output, pseudo-code) is `bash` or `text`.

`python -m tests.docs.doc_blocks PAGE WORKDIR CACHE` runs one page in this
process and prints a `RESULT {json}` line (the test's subprocess for pages
with `devices`).
"""

import contextlib
import dataclasses
import json
import linecache
import os
import pathlib
import re
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BACKENDS = ("jax", "tensorflow", "torch")
# Fence languages that are never run. Anything else but `python` is an
# error, so a Python example is not left unrun by a typo (`py`, `python3`).
NOT_RUN = {"bash", "text", "console", "json", "yaml", "toml", "ini", "markdown"}

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<language>[^`\s]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")


class DocPageError(ValueError):
    """A page the doc-block test cannot read: names the file and line."""


@dataclasses.dataclass
class Block:
    line: int  # 1-based line of the first code line in the page
    code: str
    backends: tuple = BACKENDS
    skip_reason: str = None


@dataclasses.dataclass
class Page:
    path: pathlib.Path
    blocks: list
    devices: int = None

    @property
    def name(self):
        if self.path.is_relative_to(REPO_ROOT):
            return self.path.relative_to(REPO_ROOT).as_posix()
        return self.path.name

    @property
    def code(self):
        return "\n".join(block.code for block in self.blocks)


def pages():
    """README.md and every page under docs/."""
    return [REPO_ROOT / "README.md"] + sorted((REPO_ROOT / "docs").rglob("*.md"))


def parse(path):
    path = pathlib.Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    page = Page(path=path, blocks=[])
    pending = None  # (line number, directive) waiting for its block
    index = 0
    while index < len(lines):
        line = lines[index]
        where = f"{path.name}:{index + 1}"
        directive = DIRECTIVE.match(line)
        fence = FENCE.match(line)
        if directive:
            words = directive.group("body").split()
            kind = words[0] if words else ""
            if kind == "devices" and len(words) == 2 and words[1].isdigit():
                page.devices = int(words[1])
            elif kind in ("backends", "skip"):
                if kind == "backends" and (len(words) < 2 or not set(words[1:]) <= set(BACKENDS)):
                    raise DocPageError(f"{where}: `backends` takes names among {BACKENDS}: {line.strip()}")
                if kind == "skip" and len(words) < 2:
                    raise DocPageError(f"{where}: `skip` needs a reason: {line.strip()}")
                pending = (index + 1, words)
            else:
                raise DocPageError(
                    f"{where}: unknown directive {line.strip()!r}; expected "
                    "`backends NAME...`, `skip REASON` or `devices N`."
                )
            index += 1
            continue
        if fence:
            indent, marker, language = fence.group("indent", "fence", "language")
            closing = index + 1
            while closing < len(lines) and lines[closing].strip() != marker:
                closing += 1
            if closing == len(lines):
                raise DocPageError(f"{where}: the code fence is never closed.")
            if not language:
                raise DocPageError(
                    f"{where}: a code fence without a language; write ```python "
                    "for code that runs, ```bash or ```text for what does not."
                )
            if language == "python":
                code = "\n".join(text[len(indent):] for text in lines[index + 1 : closing])
                block = Block(line=index + 2, code=code)
                if pending:
                    words = pending[1]
                    if words[0] == "backends":
                        block.backends = tuple(words[1:])
                    else:
                        block.skip_reason = " ".join(words[1:])
                    pending = None
                page.blocks.append(block)
            elif language not in NOT_RUN:
                raise DocPageError(
                    f"{where}: fence language {language!r}: write python for code "
                    f"that runs, or one of {sorted(NOT_RUN)}."
                )
            elif pending:
                raise DocPageError(f"{path.name}:{pending[0]}: a directive before a {language} block.")
            index = closing + 1
            continue
        if pending and line.strip():
            raise DocPageError(f"{path.name}:{pending[0]}: a directive not followed by a python block.")
        index += 1
    if pending:
        raise DocPageError(f"{path.name}:{pending[0]}: a directive not followed by a python block.")
    return page


@contextlib.contextmanager
def working_directory(path):
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def restored_global_state():
    """What an example may change for the rest of the process: the dtype
    policy, the distribution, the variant registry."""
    import keras

    from keras_attn.models import VARIANTS

    policy = keras.config.dtype_policy()
    distribution = keras.distribution.distribution()
    variants = dict(VARIANTS)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(policy)
        keras.distribution.set_distribution(distribution)
        VARIANTS.clear()
        VARIANTS.update(variants)
        keras.backend.clear_session()


def run_page(page, workdir, cache, backend):
    """Runs `page`'s blocks for `backend` in `workdir`. Returns a summary:
    the blocks run (line, seconds), those skipped (line, why) and the
    seconds spent writing the named files."""
    from tests.docs import doc_files

    filename = str(page.path)
    source = page.path.read_text(encoding="utf-8")
    # Tracebacks show the page's own lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    summary = {"page": page.name, "ran": [], "skipped": []}
    namespace = {"__name__": "__docs__"}
    started = time.perf_counter()
    doc_files.prepare(page.code, workdir, cache)
    summary["files_seconds"] = round(time.perf_counter() - started, 2)
    with working_directory(workdir), restored_global_state():
        for block in page.blocks:
            if block.skip_reason:
                summary["skipped"].append((block.line, f"skip: {block.skip_reason}"))
                continue
            if backend not in block.backends:
                summary["skipped"].append((block.line, f"backends {' '.join(block.backends)}"))
                continue
            # Padded so that line numbers in a traceback are the page's.
            code = compile("\n" * (block.line - 1) + block.code, filename, "exec")
            started = time.perf_counter()
            exec(code, namespace)
            summary["ran"].append((block.line, round(time.perf_counter() - started, 2)))
    return summary


def main(arguments):
    import keras

    page_path, workdir, cache = arguments
    keras.utils.set_random_seed(0)
    summary = run_page(parse(page_path), workdir, cache, keras.config.backend())
    print("RESULT " + json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1:])
