"""typer's value checks are built on use (cairn.cli.typer_values): the values are the same, a bad
one gets typer's own error, and a command whose values need no check imports no pydantic."""

from __future__ import annotations

import os
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from cairn.cli.typer_values import check_values_on_use
from cairn.exit_codes import ExitCode


class Colour(StrEnum):
    red = "red"
    green = "green"


def parsed(args: list[str]) -> dict[str, Any]:
    """What a command with one parameter of each kind receives for ``args``."""
    check_values_on_use()  # as cairn.cli.app does; idempotent
    got: dict[str, Any] = {}
    app = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)

    @app.command()
    def command(
        name: Annotated[str | None, typer.Option()] = None,
        colour: Annotated[Colour, typer.Option()] = Colour.red,
        count: Annotated[int | None, typer.Option(min=1)] = None,
        path: Annotated[Path | None, typer.Option()] = None,
        tags: Annotated[list[str] | None, typer.Option("--tag")] = None,
    ) -> None:
        got.update(name=name, colour=colour, count=count, path=path, tags=tags)

    result = CliRunner().invoke(app, args)
    got["exit"] = result.exit_code
    got["output"] = result.output
    return got


def test_values_not_given_keep_their_defaults() -> None:
    got = parsed([])

    assert got["exit"] == 0, got["output"]
    assert [got[k] for k in ("name", "count", "path", "tags")] == [None, None, None, None]
    assert got["colour"] is Colour.red


def test_given_values_are_checked_and_converted_as_typer_does() -> None:
    args = ["--name", "x", "--colour", "green", "--count", "3", "--path", "a/b", "--tag", "t"]
    got = parsed(args)

    assert got["exit"] == 0, got["output"]
    assert got["name"] == "x" and type(got["name"]) is str
    assert got["colour"] is Colour.green
    assert got["count"] == 3
    assert got["path"] == Path("a/b")
    assert got["tags"] == ["t"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--colour", "blue"], "'blue' is not one of 'red', 'green'"),
        (["--count", "x"], "Input should be a valid integer"),
        (["--count", "0"], "Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_value_gets_typers_own_error(args: list[str], message: str) -> None:
    got = parsed(args)

    assert got["exit"] == 2
    assert message in got["output"]


def cairn(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "OPENAI_"))}
    env["CAIRN_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cairn.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_typer_command_without_values_to_check_imports_no_pydantic(tmp_path: Path) -> None:
    """Regression (issue 25): typer built a pydantic check for every option of the root command
    and of the command run, given or not: about half of a ``cairn memory path``'s CPU."""
    done = cairn("memory", "path", cwd=tmp_path, home=tmp_path / "home")

    assert done.returncode == 0, done.stderr
    assert "project memory:" in done.stdout
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "typer" in modules  # the command did run through typer
    assert "pydantic" not in modules


def test_a_bad_option_value_is_still_typers_usage_error(tmp_path: Path) -> None:
    done = cairn("--approval-mode", "nope", "memory", "path", cwd=tmp_path, home=tmp_path / "h")

    assert done.returncode == ExitCode.BAD_INPUT
    assert "'nope' is not one of 'plan', 'default', 'auto-edit', 'yolo'" in done.stderr
