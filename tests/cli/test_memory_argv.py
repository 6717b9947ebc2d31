"""``cairn memory search|show|forget|list`` read without typer (issue #28: the command's
start-up was half of a search at 100,000 memories).

Each quick command line is compared with the same command after a ``--`` (typer's path: the
quick reader leaves ``--`` to typer, which reads the words after it as the arguments): stdout,
stderr and the exit code must be the same bytes. The commands run through ``cairn``'s entry
point inside the test process (tests/entry_point.py: what is compared is the command's output,
not the process); real ``cairn`` processes check that they print what the entry point prints
here, and that a quick command's process imports neither typer nor pydantic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.cli.memory_argv import QuickCommand, read_quick
from cairn.memory.paths import memory_roots

from ..entry_point import run_main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["memory", "search", "uv"], QuickCommand("search", "uv")),
        (["memory", "search", "uv", "--limit", "3"], QuickCommand("search", "uv", limit=3)),
        (["memory", "search", "--limit=3", "uv"], QuickCommand("search", "uv", limit=3)),
        (["memory", "search", "-n", "03", "uv"], QuickCommand("search", "uv", limit=3)),
        (["memory", "search", ""], QuickCommand("search", "")),
        (["memory", "show", "Use uv"], QuickCommand("show", "Use uv")),
        (["memory", "forget", "uv rule", "-y"], QuickCommand("forget", "uv rule", yes=True)),
        (["memory", "forget", "--yes", "uv"], QuickCommand("forget", "uv", yes=True)),
        (["memory", "forget", "uv"], QuickCommand("forget", "uv")),
        (["memory", "list"], QuickCommand("list")),
        (["memory", "list", "-n", "0"], QuickCommand("list", limit=0)),
    ],
)
def test_the_plain_forms_are_read_as_typer_reads_them(
    argv: list[str], expected: QuickCommand
) -> None:
    assert read_quick(argv, environ={}) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "search", "--help"],
        ["memory", "search"],  # missing argument: typer's usage error
        ["memory", "search", "a", "b"],  # an extra argument
        ["memory", "search", "--", "uv"],
        ["memory", "search", "-", "uv"],
        ["memory", "search", "uv", "--limit", "0"],  # below search's minimum
        ["memory", "search", "uv", "--limit", "-3"],
        ["memory", "search", "uv", "--limit", "+3"],
        ["memory", "search", "uv", "--limit", "3_0"],
        ["memory", "search", "uv", "--limit", "٣"],  # a digit int() reads, not ours to vouch
        ["memory", "search", "uv", "--limit"],
        ["memory", "search", "uv", "-n=3"],  # click reads "=3"
        ["memory", "search", "uv", "-n3"],
        ["memory", "search", "uv", "-n", "3", "-n", "4"],
        ["memory", "search", "uv", "--yes"],
        ["memory", "forget", "uv", "--yes=1"],
        ["memory", "forget", "uv", "-yy"],
        ["memory", "show", "-x"],
        ["memory", "list", "--stale"],
        ["memory", "list", "--forgotten"],
        ["memory", "list", "extra"],
        ["memory", "--tenant", "acme", "search", "uv"],
        ["memory", "recall", "uv"],
        ["memory"],
        ["search", "uv"],
        ["-m", "x", "memory", "search", "uv"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert read_quick(argv, environ={}) is None


def test_a_tenant_named_by_the_environment_is_left_to_typer() -> None:
    assert read_quick(["memory", "search", "uv"], environ={"CAIRN_MEMORY_TENANT": "acme"}) is None


class Project:
    """A project with its own CAIRN_HOME, and ``cairn`` run in it: through its entry point in
    this process (``cairn``), or as a process (``process``)."""

    def __init__(self, tmp_path: Path) -> None:
        self.project = tmp_path / "project"
        self.project.mkdir()
        home = tmp_path / "home"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CAIRN_"))},
            "CAIRN_HOME": str(home),
            "HOME": str(tmp_path),
            "COLUMNS": "100",
        }
        for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
            self.env.pop(name, None)
        root = memory_roots(self.project, environ={"CAIRN_HOME": str(home)}).project
        assert root is not None
        self.root = root

    def write(self, name: str, front: str, body: str) -> None:
        path = self.root / "project" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\n{front}type: project\n---\n\n{body}\n")

    def cairn(self, *args: str) -> tuple[int, str, str]:
        done = run_main(args, cwd=self.project, env=self.env)
        return done.returncode, done.stdout, done.stderr

    def process(self, *args: str, extra: str = "") -> tuple[int, str, str]:
        command = [sys.executable, *([extra] if extra else []), "-m", "cairn.cli.main", *args]
        done = subprocess.run(command, cwd=self.project, env=self.env, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
        return done.returncode, done.stdout, done.stderr


@pytest.fixture
def project(tmp_path: Path) -> Project:
    made = Project(tmp_path)
    made.write("uv", "name: Use uv\ndescription: Install with uv\n", "Always `uv pip`.")
    made.write("uvx", "name: Use uvx\ndescription: Run tools with uv\n", "uvx ruff  \n\ttabbed")
    made.write(
        "emoji", "name: Party :tada: time\ndescription: at 10:30:00\n", "Bring cake :cake: now."
    )
    made.write("plain", "name: Lunch\ndescription: Fridays at noon\n", "Tacos.\nSecond line.")
    return made


def _typer_form(args: tuple[str, ...]) -> list[str]:
    """The same command line read by typer: the arguments after a ``--``."""
    options = [a for a in args[2:] if a.startswith("-")]
    words = [a for a in args[2:] if not a.startswith("-")]
    for at, option in enumerate(list(options)):  # a value follows its option
        if option in ("--limit", "-n"):
            value = args[args.index(option) + 1]
            words.remove(value)
            options.insert(at + 1, value)
    return [*args[:2], *options, "--", *words]


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "search", "install uv"),
        ("memory", "search", "uv", "--limit", "1"),
        ("memory", "search", "kubernetes"),
        ("memory", "show", "Use uv"),
        ("memory", "show", "Use uvx"),  # trailing spaces and a tab: rich's own output
        ("memory", "show", "project/emoji.md"),  # emoji codes: rich's own output
        ("memory", "show", "Lunch"),
        ("memory", "show", "use"),  # ambiguous
        ("memory", "show", "nothing like it"),
        ("memory", "forget", "install with uv"),  # stdin is not a terminal: refused
        ("memory", "forget", "kubernetes", "--yes"),
        ("memory", "list"),
        ("memory", "list", "-n", "2"),
    ],
)
def test_a_quick_command_prints_what_typer_prints(project: Project, args: tuple[str, ...]) -> None:
    quick = project.cairn(*args)
    assert quick == project.cairn(*_typer_form(args))
    assert "Traceback" not in quick[2]


def test_forget_with_yes_then_restore_prints_what_typer_prints(project: Project) -> None:
    first = project.cairn("memory", "forget", "install with uv", "--yes")
    assert first[0] == 0 and "Forgot 1 memory entry" in first[1], first
    assert project.cairn("memory", "restore")[0] == 0
    assert project.cairn("memory", "forget", "--yes", "--", "install with uv") == first


def test_a_broken_settings_file_and_an_unknown_setting_fail_and_warn_as_typer_does(
    project: Project,
) -> None:
    settings = project.project / ".cairn" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"memory": {"enableAutoMemroy": True}}))
    warned = project.cairn("memory", "show", "Lunch")
    assert warned == project.cairn("memory", "show", "--", "Lunch")
    assert "warning: " in warned[2] and "enableAutoMemroy" in warned[2]
    settings.write_text("{ not json")
    broken = project.cairn("memory", "search", "uv")
    assert broken[0] == 52 and broken[2].startswith("error: ")
    assert broken == project.cairn("memory", "search", "--", "uv")


def test_an_empty_memory_lists_where_memories_go_as_typer_does(tmp_path: Path) -> None:
    empty = Project(tmp_path)
    listed = empty.cairn("memory", "list")
    assert listed[0] == 0 and "No memories yet" in listed[1]
    assert listed == empty.cairn("memory", "list", "--")


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "search", "install uv"),  # the quick path, a rich table
        ("memory", "show", "--", "Use uvx"),  # typer's path, rich's own output
        ("memory", "forget", "install with uv"),  # refused: an error and its exit code
    ],
)
def test_a_cairn_process_prints_what_its_entry_point_prints_here(
    project: Project, args: tuple[str, ...]
) -> None:
    """The real-process check of the comparisons above: the same bytes and exit code from a
    ``cairn`` process as from the entry point run in this process."""
    assert project.process(*args) == project.cairn(*args)


@pytest.mark.parametrize(
    ("args", "loaded"),
    [
        (("memory", "show", "Lunch"), ()),  # into a pipe: plain text, no rich
        (("memory", "search", "lunch"), ("rich.table",)),
        (("memory", "list", "-n", "2"), ()),
    ],
)
def test_a_quick_command_imports_neither_typer_nor_pydantic(
    project: Project, args: tuple[str, ...], loaded: tuple[str, ...]
) -> None:
    code, _, imports = project.process(*args, extra="-Ximporttime")
    assert code == 0, imports
    modules = {line.rsplit("|", 1)[-1].strip() for line in imports.splitlines() if "|" in line}
    assert not {"typer", "click", "pydantic"} & modules
    assert ("rich" in modules) == bool(loaded)
    assert set(loaded) <= modules
