"""docs/permissions.md says what the code does: its lists, tables and examples are checked here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from cairn.config.settings import Settings
from cairn.tools import shell_git
from cairn.tools.permissions import PermissionRules
from cairn.tools.shell_readonly import READ_ONLY_PROGRAMS, ShellScope, read_only_refusal
from cairn.vocabulary.tool_names import TOOL_ALIASES

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = (DOCS / "permissions.md").read_text()


def section(name: str, doc: str = DOC) -> str:
    match = re.search(f"<!-- {name} -->(.*?)<!-- /{name} -->", doc, re.DOTALL)
    assert match is not None, name
    return match.group(1)


def commands(name: str) -> list[str]:
    block = section(name).strip().removeprefix("```sh").removesuffix("```")
    return [line for line in block.strip().splitlines() if line]


@pytest.fixture
def project(tmp_path: Path) -> ShellScope:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    for name in ("README.md", "setup.cfg", "src/app.py"):
        (root / name).write_text("TODO\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return ShellScope.of(root)


@pytest.mark.parametrize("page", ["permissions.md", "usage.md"])
def test_the_read_only_program_list_is_the_codes(page: str) -> None:
    doc = (DOCS / page).read_text()
    listed = set(re.findall(r"`([^`]+)`", section("read-only-programs", doc)))

    assert listed == set(READ_ONLY_PROGRAMS)


def test_the_examples_that_run_unasked_do(project: ShellScope) -> None:
    for command in commands("runs-unasked"):
        assert read_only_refusal(command, project) is None, command


def test_the_examples_that_ask_do(project: ShellScope) -> None:
    for command in commands("asks"):
        assert read_only_refusal(command, project) is not None, command


def test_the_tool_name_table_matches_the_aliases() -> None:
    rows = re.findall(r"^\| (`[^|]+`) \| (`[^|]+`) \|$", DOC, re.MULTILINE)
    documented: dict[str, str] = {}
    for names, aliases in rows:
        canonical = re.findall(r"`([^`]+)`", names)
        others = re.findall(r"`([^`]+)`", aliases)
        if len(canonical) == 1:
            documented.update(dict.fromkeys(others, canonical[0]))
        else:
            documented.update(zip(others, canonical, strict=True))

    assert documented
    for alias, canonical in documented.items():
        assert TOOL_ALIASES[alias] == canonical, alias


def test_the_git_subcommands_listed_are_the_codes() -> None:
    sentence = DOC.split("**git** is read-only only for", 1)[1].split("each with an allow-list")[0]
    sentence = re.sub(r"\([^)]*\)", "", sentence)  # "(`-v`, `get-url`, ...)" are not subcommands
    listed = set(re.findall(r"`([a-z-]+)[`\s]", sentence))
    in_code = set(shell_git._SUBCOMMANDS) | {"version", "rev-parse", "remote", "config"}

    assert listed == in_code


def test_the_json_examples_are_valid_settings() -> None:
    for block in re.findall(r"```json\n(.*?)```", DOC, re.DOTALL):
        data = json.loads(block)
        settings = Settings.model_validate(data)
        assert PermissionRules.from_settings(settings.permissions).warnings == ()
