"""What a real ``cairn -p`` imports: the modules of features a run does not use stay unimported
(their cost is in benchmarks/README.md), and each is imported once its feature is configured.

Only *what* is imported is checked, never how long it takes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from cairn._version import __version__
from cairn.testing import RecordedRequest, ScriptedServer, reply

from ..mcp.helpers import patient_discovery, tools_server
from .conftest import run_probed, trust_in_user_settings, write_settings

pytestmark = pytest.mark.slow

Setup = Callable[[Path], None]


class Feature(NamedTuple):
    """A feature's module, what a project does to use the feature, what the first model request
    then shows of it, and the prompt that uses it."""

    module: str
    setup: Setup
    works: Callable[[RecordedRequest], bool]
    prompt: str = "hi"


def _command_file(project: Path) -> None:
    folder = project / ".cairn" / "commands"
    folder.mkdir(parents=True)
    (folder / "hello.md").write_text("---\ndescription: Say hello\n---\nSay hello.\n")


def _skill(project: Path) -> None:
    folder = project / ".cairn" / "skills" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: Greets.\n---\nGreet.\n")


def _agent_file(project: Path) -> None:
    folder = project / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews a change.\n---\nReview the change.\n"
    )


def _web_search(project: Path) -> None:
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "tools": {"webSearch": {"provider": "tavily", "apiKey": "k"}},
        },
    )
    trust_in_user_settings(project)  # a project's search key needs the folder trusted


def _mcp_entry(project: Path) -> dict[str, Any]:
    """An entry starting the test MCP server (its log and PIDs beside the project)."""
    return tools_server(project.parent).stdio_config()


def _mcp_in_settings(project: Path) -> None:
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "mcpServers": {"tools": _mcp_entry(project)},
        },
    )
    trust_in_user_settings(project)
    patient_discovery(project.parent / "cairn-home")  # the server's tools in the first request


def _mcp_json(project: Path) -> None:
    entry = {"type": "stdio", **_mcp_entry(project)}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"tools": entry}}))
    trust_in_user_settings(project)
    patient_discovery(project.parent / "cairn-home")


def _subagent_types(request: RecordedRequest) -> list[str]:
    agent = next(t for t in request.tools if t["function"]["name"] == "agent")
    return list(agent["function"]["parameters"]["properties"]["subagent_type"]["enum"])


FEATURES: dict[str, Feature] = {
    "command file": Feature(
        "cairn.extensions.commands",
        _command_file,
        lambda request: request.last_user_text() == "Say hello.",
        "/hello",
    ),
    "skill": Feature(
        "cairn.extensions.skills", _skill, lambda request: "skill" in request.tool_names
    ),
    "agent file": Feature(
        "cairn.extensions.agents",
        _agent_file,
        lambda request: _subagent_types(request) == ["reviewer", "general-purpose"],
    ),
    "web search": Feature(
        "cairn.tools.web_search", _web_search, lambda request: "web_search" in request.tool_names
    ),
    "MCP server in settings": Feature(
        "cairn.mcp.config", _mcp_in_settings, lambda request: MCP_TOOL in request.tool_names
    ),
    "MCP server in .mcp.json": Feature(
        "cairn.mcp.config", _mcp_json, lambda request: MCP_TOOL in request.tool_names
    ),
}
MCP_TOOL = "mcp__tools__echo"
# The readers of the files above: a project without such files has no use for them.
FILE_PARSERS = ("cairn.config.frontmatter", "cairn.config.extension_files")
# Needed only by /rewind (a live session takes its checkpoints without them).
NEVER_IN_A_TURN = ("cairn.session.rewind", "cairn.recording.rewind")
# Settings are read without it (cairn.config.sections): a third of a start-up's instructions.
PYDANTIC = "pydantic"
# The extract worker's own option parser: `cairn -p` imports the worker's module to start it.
WORKER_ONLY = ("argparse",)
WATCHED = (
    *{f.module: None for f in FEATURES.values()},
    *FILE_PARSERS,
    *NEVER_IN_A_TURN,
    PYDANTIC,
    *WORKER_ONLY,
)

PROBE = (
    "import atexit, json, sys\n"
    f"watched = {WATCHED!r}\n"
    "atexit.register(lambda: sys.stderr.write("
    "'IMPORTED ' + json.dumps([m for m in watched if m in sys.modules]) + '\\n'))\n"
    "from cairn.cli.main import main\n"
    "sys.argv = ['cairn', '-p', sys.argv[1]]\n"
    "main()\n"
)


def imported(project: Path, env: dict[str, str], prompt: str = "hi") -> list[str]:
    """The watched modules a ``cairn -p <prompt>`` in ``project`` had imported when it exited."""
    done = run_probed(PROBE, project, env, prompt)
    assert done.stdout == "plain\n"
    line = next(x for x in done.stderr.splitlines() if x.startswith("IMPORTED "))
    return list(json.loads(line.removeprefix("IMPORTED ")))


def test_a_plain_run_imports_none_of_the_features_it_does_not_use(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    scripted_server.enqueue(reply("plain"))

    assert imported(project, cairn_env) == []


def test_settings_files_and_memory_are_read_without_pydantic(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    """Regression (issue 32): the settings' pydantic models cost every start-up about a third
    of its instructions; a run with a user and a project settings file naming many sections
    (memory on) now imports no pydantic at all."""
    write_settings(
        project,
        {
            "model": {"generationConfig": {"timeout": 60, "maxOutputTokens": {"main": 4096}}},
            "tools": {"sandbox": False, "approvalMode": "default"},
            "context": {"fileName": ["AGENTS.md"]},
            "permissions": {"allow": ["Bash(ls)"]},
        },
    )
    user = Path(cairn_env["CAIRN_HOME"]) / "settings.json"
    user.write_text(json.dumps({"general": {"showSessionRecap": True}, "fastModel": "small"}))
    scripted_server.enqueue(reply("plain"))

    loaded = imported(project, cairn_env)

    assert PYDANTIC not in loaded


@pytest.mark.parametrize("name", list(FEATURES))
def test_a_feature_in_use_imports_its_module(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path, name: str
) -> None:
    feature = FEATURES[name]
    feature.setup(project)
    scripted_server.enqueue(reply("plain"))

    loaded = imported(project, cairn_env, feature.prompt)

    assert feature.module in loaded
    assert not set(loaded) & set(NEVER_IN_A_TURN)
    assert feature.works(scripted_server.requests_for("main")[0])


# What a bare `cairn --version` may import besides the interpreter's own start-up (issue 25):
# it used to import typer and, through typer's parameter adapters, pydantic (0.45 s of CPU).
VERSION_MAY_IMPORT = {
    "cairn",
    "cairn._startup",  # the program pauses the collector first (gc)
    "cairn._version",
    "cairn.cli",
    "cairn.exit_codes",  # and enum
    *("__future__", "atexit", "enum", "gc", "threading", "_weakrefset"),
}
NOT_FOR_THE_VERSION = ("typer", "click", "pydantic", "rich", "asyncio", "typing", "dataclasses")


def test_the_version_is_printed_without_importing_typer_or_pydantic(tmp_path: Path) -> None:
    """A real ``python -m cairn.cli.main --version`` (the tests' and ``cairn``'s entry point):
    ``-X importtime`` names every module it imports after the interpreter's start-up."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    bare = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cairn.cli.main", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert (done.returncode, done.stdout) == (0, f"{__version__}\n"), done.stderr
    imported = _importtime_names(done.stderr) - _importtime_names(bare.stderr)
    runpy = {"runpy", "importlib.util", "contextlib", "functools", "_functools"}  # `-m`'s own
    runpy |= {"importlib", "importlib.machinery", "importlib._abc", "_collections", "keyword"}
    runpy |= {"collections", "itertools", "operator", "_operator", "reprlib", "types", "warnings"}
    assert imported - runpy - VERSION_MAY_IMPORT == set()
    assert not imported & set(NOT_FOR_THE_VERSION)


def _importtime_names(stderr: str) -> set[str]:
    return {
        line.split("|")[2].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "self [us]" not in line
    }
