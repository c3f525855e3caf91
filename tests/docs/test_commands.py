"""The shell commands the README and the documentation give work in the
order they are given: the README's test command ran pytest in an
environment its set-up had installed without pytest, its install line
named a package index keras_attn is not on, and the pages mixed bare
`pip`/`mkdocs` with `.venv/bin/...`.

The commands are read from ```` ```bash ```` blocks (run in order, from
the top of each page) and from inline code spans that start with a
command. Nothing is run: each command is checked against the extras that
the commands before it installed, read from setup.cfg."""

import configparser
import re

import pytest

from tests.docs.doc_blocks import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = [README] + sorted((REPO_ROOT / "docs").rglob("*.md"))
EXAMPLES = sorted((REPO_ROOT / "examples").rglob("*.py"))
FENCE = re.compile(r"^ *```+(?P<language>\w*)\s*$")
INLINE = re.compile(r"`([^`\n]+)`")
# A command at the start of a line or an inline span: environment variables,
# then the program.
PROGRAM = re.compile(r"^(?:[A-Z_]+=\S* )*(?P<program>\S+)")
TOOLS = ("pip", "python", "python3", "mkdocs", "pytest")
EDITABLE = re.compile(r'pip install (?:--[\w-]+ )*-e "\.\[(?P<extras>[\w,]*)\]"')
RELEASED = re.compile(r'pip install "?keras_attn\b')
BACKENDS = ("tensorflow", "jax", "torch")


def extras():
    """`{extra: requirement text}` of setup.cfg."""
    setup = configparser.ConfigParser()
    setup.read(REPO_ROOT / "setup.cfg")
    return dict(setup["options.extras_require"])


def bash_commands(text):
    """`(line number, command)` for every command line of the ```bash
    blocks of a page, in order, without comments."""
    commands, language = [], None
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            language = None if language is not None else fence.group("language")
            continue
        if language == "bash":
            command = line.split(" #")[0].strip()
            if command and not command.startswith("#"):
                commands.append((number, command))
    return commands


def inline_commands(text):
    """`(line number, command)` for every inline code span outside code
    blocks that starts with a tool of TOOLS (possibly after `VAR=value`)."""
    commands, in_block = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_block = not in_block
            continue
        if in_block:
            continue
        for span in INLINE.findall(line):
            program = PROGRAM.match(span)
            # A command has arguments: a bare `python` names a fence language.
            if program and program.group("program").split("/")[-1] in TOOLS and " " in span.strip():
                commands.append((number, span))
    return commands


def steps(command):
    """A command line's steps (`a && b; c`)."""
    return [step.strip() for step in re.split(r"&&|;", command) if step.strip()]


def ci_extras():
    """The extras `.ci/run` installs into the fresh `.venv` it makes."""
    text = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    return set(EDITABLE.search(text).group("extras").split(","))


def has_backend(installed, backend):
    return backend in installed or "all" in installed


def check_in_order(commands, installed, page):
    """Follows `commands` from the environment `installed` (a set of
    extras, or None when there is no `.venv` yet): each command must find
    what it needs. Returns the extras installed at the end."""
    problems = []
    for number, command in commands:
        for step in steps(command):
            where = f"{page}:{number}: `{step}`"
            if re.match(r"python3? -m venv \.venv\b", step):
                installed = set()
                continue
            if step.startswith("bash .ci/run"):
                installed = ci_extras()
                continue
            if ".venv/bin/" in step and installed is None:
                problems.append(f"{where} runs before a `.venv` is made")
                continue
            editable = EDITABLE.search(step)
            if editable:
                installed = installed | set(editable.group("extras").split(","))
                continue
            if "-m pytest" in step or re.search(r"(^|/)pytest\b", step):
                if "test" not in installed:
                    problems.append(f"{where} runs pytest, which the commands before it did not install ([test])")
            if re.search(r"(^|/)mkdocs\b", step) and not installed & {"docs", "test"}:
                problems.append(f"{where} runs mkdocs, which the commands before it did not install ([docs])")
            if "examples/quickstart.py" in step and "demo" not in installed:
                problems.append(f"{where} needs the [demo] extra")
            backend = re.search(r"KERAS_BACKEND=(\w+)", step)
            if backend and backend.group(1) in BACKENDS and ".venv/bin/python" in step:
                if not has_backend(installed, backend.group(1)):
                    problems.append(f"{where} needs the {backend.group(1)} backend, not installed")
    return installed, problems


def readme_environment():
    """The extras the README's first install line leaves in `.venv`: the
    environment the other pages' commands start from."""
    text = README.read_text(encoding="utf-8")
    for _, command in bash_commands(text):
        if EDITABLE.search(command):
            return set(EDITABLE.search(command).group("extras").split(","))
    raise AssertionError("README.md has no install command")


def test_the_readme_commands_work_in_the_order_given():
    installed, problems = check_in_order(bash_commands(README.read_text(encoding="utf-8")), None, "README.md")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", [page for page in PAGES if page != README], ids=lambda page: page.name)
def test_each_page_s_commands_work_after_the_readme_set_up(page):
    commands = bash_commands(page.read_text(encoding="utf-8"))
    _, problems = check_in_order(commands, readme_environment(), page.relative_to(REPO_ROOT))
    assert not problems, "\n".join(problems)


def test_the_readme_s_first_command_is_the_main_job_and_installs_what_it_suggests():
    """The quickstart's first command installs the project and runs the
    main job; the job plots its training curve with matplotlib, which it
    suggests installing where it is missing: the [examples] extra."""
    _, first = bash_commands(README.read_text(encoding="utf-8"))[0]
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install -e")
    assert first.endswith(".venv/bin/python examples/quickstart.py")
    assert {"demo", "examples"} <= set(EDITABLE.search(first).group("extras").split(","))


def install_lines():
    """`(where, text)` of every `pip install` in the README, the pages and
    the examples (their docstrings and messages)."""
    found = []
    for path in PAGES + EXAMPLES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "pip install" in line:
                found.append((f"{path.relative_to(REPO_ROOT)}:{number}", line))
    return found


def test_every_install_line_names_extras_that_exist():
    known = set(extras())
    lines = install_lines()
    assert len(lines) > 5
    for where, line in lines:
        for group in re.findall(r'pip install (?:-e )?"(?:\.|keras_attn)\[([\w,]*)\]', line):
            unknown = set(group.split(",")) - known
            assert not unknown, f"{where}: extras {sorted(unknown)} are not in setup.cfg ({sorted(known)})"


def test_the_released_form_is_given_only_as_a_future_release():
    """keras_attn is on no package index yet: `pip install "keras_attn[jax]"`
    fails. The README and pages give the form from a clone; the released
    form only where the text says it is for a future release; the
    library's own messages (a missing backend, a missing torch) give the
    clone's form."""
    for path in PAGES + EXAMPLES + sorted((REPO_ROOT / "keras_attn").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in RELEASED.finditer(text):
            context = text[max(0, match.start() - 300) : match.end()].lower()
            assert "future release" in context or "none yet" in context, (
                f"{path.relative_to(REPO_ROOT)}: `{text[match.start():match.end() + 20]}` is given "
                "as if keras_attn were on a package index; give the clone's "
                '`pip install -e ".[jax]"`, or say it is for a future release'
            )


def test_commands_run_the_virtual_environment_s_tools():
    """One convention: the quickstart makes `.venv`, and every later
    command runs its tools as `.venv/bin/...` (only the venv's creation and
    the future release's line use the system's)."""
    bare = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for number, command in bash_commands(text) + inline_commands(text):
            for step in steps(command):
                program = PROGRAM.match(step)
                if not program or program.group("program") not in TOOLS:
                    continue
                if re.match(r"python3 -m venv \.venv\b", step) or RELEASED.match(step):
                    continue
                bare.append(f"{page.relative_to(REPO_ROOT)}:{number}: `{step}`")
    assert not bare, "commands not run from .venv/bin:\n" + "\n".join(bare)


def test_the_order_check_finds_a_missing_set_up():
    """The check itself: pytest after an install without [test] fails, and
    passes after one with it."""
    commands = [
        (1, 'python3 -m venv .venv && .venv/bin/pip install -e ".[all,demo]" -c constraints.txt'),
        (2, "KERAS_BACKEND=jax .venv/bin/python -m pytest tests"),
    ]
    _, problems = check_in_order(commands, None, "page")
    assert len(problems) == 1 and "pytest" in problems[0]
    commands.insert(1, (2, '.venv/bin/pip install -e ".[test]" -c constraints.txt'))
    _, problems = check_in_order(commands, None, "page")
    assert not problems
    _, problems = check_in_order([(1, ".venv/bin/mkdocs serve")], None, "page")
    assert problems
