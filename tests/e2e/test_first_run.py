"""`cairn --help` and `cairn demo` as a new user runs them."""

from __future__ import annotations

import subprocess
import sys

from cairn.cli.app import COMMAND_GROUPS

from .conftest import RunCairn


def test_help_lists_every_command_and_group(run_cairn: RunCairn) -> None:
    """Regression: `cairn --help` did not list `memory` (it was added only when invoked)."""
    result = run_cairn("--help")

    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:", 1)[1]
    listed = {line.split()[0] for line in commands.splitlines() if line.strip()}
    assert {"demo", "serve", "memory"} <= listed
    assert {group.name for group in COMMAND_GROUPS} <= listed
    assert "List, search, recall, forget and restore memories." in " ".join(commands.split())


def test_help_says_how_to_start_with_a_prompt(run_cairn: RunCairn) -> None:
    result = run_cairn("--help")

    usage = " ".join(result.stdout.split("Options:", 1)[0].split())
    assert 'cairn "PROMPT"' in usage  # the UI with a first prompt
    assert 'cairn -p "PROMPT"' in usage  # one turn, no UI


def test_a_group_still_runs_and_has_its_own_help(run_cairn: RunCairn) -> None:
    result = run_cairn("memory", "--help")

    assert result.returncode == 0, result.stderr
    for command in ("list", "search", "recall", "forget", "restore", "log"):
        assert command in result.stdout


def test_help_does_not_load_the_groups() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['cairn', '--help']\n"
        "from cairn.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "loaded = [g.module for g in __import__('cairn.cli.app').cli.app.COMMAND_GROUPS"
        " if g.module in sys.modules]\n"
        "print('LOADED', loaded, 'cairn.memory' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )

    assert "LOADED [] False" in result.stdout, result.stdout + result.stderr



def test_cairn_demo_runs_and_ends_with_the_next_steps(
    run_cairn: RunCairn, cairn_env: dict[str, str]
) -> None:
    result = run_cairn("demo", timeout=120)

    assert result.returncode == 0, result.stderr
    ending = result.stdout[result.stdout.index("What next") :]
    assert "export OPENAI_BASE_URL=" in ending
    assert f"{cairn_env['CAIRN_HOME']}/memories" in ending
    assert "Traceback" not in result.stderr
