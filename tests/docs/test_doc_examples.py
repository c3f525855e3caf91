"""Every ```python block of the README and docs/*.md runs, on the backend
KERAS_BACKEND selects: a documentation example that breaks fails here.

Each page's blocks run in order in one namespace, in a temporary directory
holding small random files of the names the page's code mentions
(tests/docs/doc_files.py); how pages steer the test is in
tests/docs/doc_blocks.py."""

import json
import os
import subprocess
import sys
import warnings

import keras
import pytest

from tests.docs import doc_blocks
from tests.docs import doc_files

BACKEND = keras.config.backend()
PAGES = doc_blocks.pages()


def page_id(path):
    return path.relative_to(doc_blocks.REPO_ROOT).as_posix()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """The named files, written once for every page of this run."""
    return str(tmp_path_factory.mktemp("doc_files"))


def run_in_subprocess(page, workdir, cache):
    """`page` in a fresh Python with `page.devices` virtual CPU devices."""
    environment = dict(os.environ, KERAS_BACKEND=BACKEND)
    environment["XLA_FLAGS"] = " ".join(
        filter(None, [environment.get("XLA_FLAGS"),
                      f"--xla_force_host_platform_device_count={page.devices}"])
    )
    result = subprocess.run(
        [sys.executable, "-m", "tests.docs.doc_blocks", str(page.path), workdir, cache],
        cwd=doc_blocks.REPO_ROOT, env=environment, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, f"{page.name}:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_python_blocks_run(path, tmp_path, cache, monkeypatch):
    page = doc_blocks.parse(path)
    if not page.blocks:
        pytest.skip(f"{page.name} has no python block")
    # The pages run as a reader runs them: torch compiles a decoding step
    # once it pays (the default), not at its first step as the rest of the
    # suite has it (tests/conftest.py).
    monkeypatch.delenv("KERAS_ATTN_TORCH_COMPILE", raising=False)
    if page.devices and BACKEND == "jax":
        summary = run_in_subprocess(page, str(tmp_path), cache)
    else:
        summary = doc_blocks.run_page(page, str(tmp_path), cache, BACKEND)
    skipped = [f"{page.name}:{line} ({why})" for line, why in summary["skipped"]]
    ran = ", ".join(f"{line} ({seconds} s)" for line, seconds in summary["ran"])
    print(f"{page.name}: files {summary['files_seconds']} s; ran lines {ran or 'none'}; "
          f"skipped {skipped or 'none'}")
    # Blocks marked `skip` never run anywhere: say so in every test report.
    never_run = [entry for entry in skipped if "(skip:" in entry]
    if never_run:
        warnings.warn(f"documentation blocks not run: {never_run}")
    assert summary["ran"] or skipped


def test_every_page_parses_and_every_block_runs_somewhere():
    """Directives are valid, fences are labelled, and each python block
    runs on at least one backend unless marked `skip`."""
    for path in PAGES:
        page = doc_blocks.parse(path)
        for block in page.blocks:
            assert block.skip_reason or block.backends, f"{page.name}:{block.line}"


def test_parser_reads_directives_and_refuses_unlabelled_fences(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n<!-- docs-test: devices 4 -->\n\n```python\nx = 1\n```\n\n"
        "<!-- docs-test: backends torch -->\n```python\ny = x\n```\n\n"
        "```bash\necho not run\n```\n\n<!-- docs-test: skip too slow -->\n```python\nz = 2\n```\n",
        encoding="utf-8",
    )
    parsed = doc_blocks.parse(page)
    assert parsed.devices == 4
    assert [(block.line, block.code, block.backends, block.skip_reason) for block in parsed.blocks] == [
        (6, "x = 1", doc_blocks.BACKENDS, None),
        (11, "y = x", ("torch",), None),
        (20, "z = 2", doc_blocks.BACKENDS, "too slow"),
    ]
    for text, message in [
        ("```\nx = 1\n```\n", "without a language"),
        ("```py\nx = 1\n```\n", "fence language 'py'"),
        ("<!-- docs-test: backends cuda -->\n```python\nx = 1\n```\n", "backends"),
        ("<!-- docs-test: backends jax -->\nsome prose\n```python\nx = 1\n```\n", "not followed"),
        ("<!-- docs-test: sometimes -->\n", "unknown directive"),
        ("```python\nx = 1\n", "never closed"),
    ]:
        page.write_text(text, encoding="utf-8")
        with pytest.raises(doc_blocks.DocPageError, match=message):
            doc_blocks.parse(page)


def test_a_failing_block_reports_its_page_line(tmp_path, cache):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nx = 1\n\nraise RuntimeError(x)\n```\n", encoding="utf-8")
    workdir = tmp_path / "work"
    workdir.mkdir()
    with pytest.raises(RuntimeError) as raised:
        doc_blocks.run_page(doc_blocks.parse(page), str(workdir), cache, BACKEND)
    frame = raised.traceback[-1]
    assert (frame.path, frame.lineno + 1) == (page, 6)


def test_files_named_in_code_are_found():
    code = (
        'build("uncased_L-12_H-768_A-12/bert_config.json")\n'
        "Tokenizer('vocab.txt')\nbuild(\"gpt2/\")\nload('t5-small')\n"
        'open("my_vocab.txt"); build("bert-base-uncased-finetuned/")\n'
    )
    assert doc_files.named_in(code) == ["vocab.txt", "uncased_L-12_H-768_A-12/", "gpt2/", "t5-small/"]
