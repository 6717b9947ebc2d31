"""Every example in README.md and docs/ is run by a test: this module runs the settings files,
command lines and memory files, and checks that every other example is claimed by the test that
runs it.

An example is a fenced block. Its kind is the marker on the line above it
(``<!-- docs-test: settings -->``, or a page's own ``<!-- name -->``), else its language. A kind
is either run here (:data:`RUN_HERE`), run by a page's own test (:data:`RUN_ELSEWHERE`), or
``illustration`` with a reason after a colon (a folder tree, a response shown for reference).
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer._click.core import Command  # typer's copy of click: what `cairn` parses with
from typer._click.exceptions import UsageError
from typer.core import TyperGroup as Group

from cairn.config.loader import load_settings
from cairn.memory.store.parse import parse_memory_text

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SRC = ROOT / "src" / "cairn"

# Kinds this module runs, on any page.
RUN_HERE = {
    "settings": "loaded as a settings.json, with no error and no warning",
    "cli": "each cairn command line parsed by cairn's own parser; each variable one cairn reads",
    "memory-file": "read by the memory store's parser as a valid memory",
}
# (page, kind) -> the test that runs those examples.
RUN_ELSEWHERE = {
    ("README.md", "sh"): "tests/test_readme.py",
    ("acp.md", "zed-settings"): "tests/e2e/test_acp_docs.py",
    ("agents.md", "agent-file"): "tests/extensions/test_docs.py",
    ("commands.md", "command-file"): "tests/extensions/test_docs.py",
    ("commands.md", "command-sent"): "tests/extensions/test_docs.py",
    ("daemon.md", "run"): "tests/e2e/test_daemon_docs.py",
    ("daemon.md", "stream"): "tests/e2e/test_daemon_docs.py",
    ("daemon.md", "haproxy"): "tests/daemon/test_replica_docs.py",
    ("hooks.md", "json"): "tests/hooks/test_docs.py",
    ("mcp.md", "mcp-json"): "tests/mcp/test_docs.py",
    ("mcp.md", "zed-mcp"): "tests/mcp/test_docs.py",
    ("mcp.md", "daemon-mcp"): "tests/mcp/test_docs.py",
    ("hooks.md", "bash"): "tests/hooks/test_docs.py",
    ("permissions.md", "json"): "tests/tools/test_permissions_doc.py",
    ("permissions.md", "runs-unasked"): "tests/tools/test_permissions_doc.py",
    ("permissions.md", "asks"): "tests/tools/test_permissions_doc.py",
    ("sdk.md", "run"): "tests/sdk/test_docs.py",
    ("skills.md", "skill-file"): "tests/extensions/test_docs.py",
    ("testing.md", "run"): "tests/testing/test_docs_examples.py",
    ("testing.md", "json"): "tests/testing/test_docs_examples.py",
    ("testing.md", "pytest"): "tests/testing/test_docs_examples.py",
    ("testing.md", "server-cli"): "tests/testing/test_docs_examples.py",
}
_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```", re.MULTILINE | re.DOTALL
)
_MARKER = re.compile(r"<!-- (?:docs-test: )?(?P<kind>[\w-]+)(?::\s*(?P<reason>[^>]*?))? -->")


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    language: str
    kind: str
    reason: str
    body: str

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.line}"


def examples() -> list[Example]:
    found: list[Example] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for fence in _FENCE.finditer(text):
            before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            marker = _MARKER.fullmatch(before)
            body = textwrap.dedent(fence["body"])
            found.append(
                Example(
                    page=page,
                    line=text[: fence.start()].count("\n") + 1,
                    language=fence["lang"],
                    kind=marker["kind"] if marker else fence["lang"],
                    reason=(marker["reason"] or "") if marker else "",
                    body=body,
                )
            )
    return found


def of_kind(kind: str) -> list[Example]:
    return [example for example in examples() if example.kind == kind]


def ids(items: list[Example]) -> list[str]:
    return [example.name for example in items]


# ----- every example is run somewhere -----


def test_the_pages_have_examples() -> None:
    assert len(examples()) > 30
    assert {example.kind for example in examples()} >= set(RUN_HERE)


def test_every_example_is_run_by_a_test_or_says_why_not() -> None:
    unclaimed = [
        f"{example.name} ({example.kind})"
        for example in examples()
        if example.kind not in RUN_HERE
        and (example.page.name, example.kind) not in RUN_ELSEWHERE
        and not (example.kind == "illustration" and example.reason)
    ]

    assert unclaimed == [], (
        "mark each with the line <!-- docs-test: KIND --> above it: settings, cli, memory-file, "
        "a kind its page's test runs (RUN_ELSEWHERE), or illustration: <why it is not run>"
    )


def test_the_tests_that_claim_examples_read_their_page() -> None:
    for (page, _), test in RUN_ELSEWHERE.items():
        source = (ROOT / test).read_text(encoding="utf-8")
        assert Path(page).stem in source or page in source, f"{test} does not read {page}"


# ----- settings files -----


@pytest.mark.parametrize("example", of_kind("settings"), ids=ids(of_kind("settings")))
def test_a_settings_example_loads_without_warnings(example: Example, tmp_path: Path) -> None:
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(example.body, encoding="utf-8")
    json.loads(example.body)  # a precise message first if it is not JSON at all

    loaded = load_settings(tmp_path, user_path=settings_file)

    assert loaded.warnings == []
    assert loaded.files == [settings_file]


# ----- command lines -----


def _cairn_command() -> Group:
    from cairn.cli.app import COMMAND_GROUPS, app, mount_command_groups

    for group in COMMAND_GROUPS:
        mount_command_groups([group.name])  # every group for real: their commands are parsed
    command = typer.main.get_command(app)
    assert isinstance(command, Group)
    return command


def _command_lines(example: Example) -> list[list[str]]:
    """Each simple command of the block (``$ `` lines only in a console transcript)."""
    text = example.body.replace("\\\n", " ")
    lines = text.splitlines()
    if example.language == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    commands: list[list[str]] = []
    for line in lines:
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
            words = shlex.split(part, comments=True)
            if words:
                commands.append(words)
    return commands


def _parse(group: Group, words: list[str]) -> None:
    """Parse ``cairn words...`` the way the real command does, down to the subcommand (first
    as cairn.cli.main does: a bare ``-p``, and words that name no command, are a prompt)."""
    from cairn.cli.app import command_names
    from cairn.cli.options import split_initial_prompt, with_bare_prompt

    words, _ = split_initial_prompt(with_bare_prompt(words), command_names())
    context = group.make_context("cairn", list(words), resilient_parsing=False)
    rest = [*context._protected_args, *context.args]
    command: Command = group
    while rest and isinstance(command, Group):
        name, sub, rest = command.resolve_command(context, rest)
        assert sub is not None, name
        context = sub.make_context(name or "", rest, parent=context)
        rest = [*context._protected_args, *context.args] if isinstance(sub, Group) else []
        command = sub


def _variables_cairn_reads() -> set[str]:
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        names |= set(re.findall(r"\"((?:CAIRN|OPENAI|ANTHROPIC)_[A-Z_]+)\"", path.read_text()))
    return names


@pytest.mark.parametrize("example", of_kind("cli"), ids=ids(of_kind("cli")))
def test_a_command_line_example_is_one_cairn_accepts(example: Example) -> None:
    group = _cairn_command()
    read = _variables_cairn_reads()
    checked = 0
    for words in _command_lines(example):
        if words[0] == "export":
            words = words[1:]
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name = words.pop(0).split("=", 1)[0]
            assert name in read, f"{example.name}: cairn does not read {name}"
            checked += 1
        if words and words[0] == "cairn":
            try:
                _parse(group, words[1:])
            except UsageError as error:
                pytest.fail(f"{example.name}: {shlex.join(words)}: {error.format_message()}")
            checked += 1
    assert checked, f"{example.name} holds no cairn command line or variable"


def test_a_wrong_command_line_is_caught() -> None:
    """The parse above can fail: an unknown option or command is refused."""
    group = _cairn_command()
    wrong = (["--no-such-flag"], ["memory", "frobnicate"], ["-o", "yaml", "-p", "x"], ["x", "-q"])
    for words in wrong:
        with pytest.raises(UsageError):
            _parse(group, words)


# ----- memory files -----


@pytest.mark.parametrize("example", of_kind("memory-file"), ids=ids(of_kind("memory-file")))
def test_a_memory_file_example_is_a_valid_memory(example: Example, tmp_path: Path) -> None:
    path = tmp_path / "feedback" / "example.md"

    doc = parse_memory_text(
        example.body, path=path, relative_path="feedback/example.md", scope="project",
        mtime=0.0, size=len(example.body),
    )  # fmt: skip

    assert not hasattr(doc, "reason"), doc
    assert doc.title and doc.description and doc.body
