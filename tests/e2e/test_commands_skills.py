"""Commands and skills from files, through the real ``cairn -p`` and ``cairn --acp`` processes.

The files are Claude Code's and Qwen Code's own formats, copied in as they are.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from acp.schema import AvailableCommandsUpdate

from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import ScriptedServer, reply, tool_call

from .conftest import RunCairn
from .test_acp_process import running_agent
from .test_daemon import serve as serve_fixture
from .test_daemon import until

serve = serve_fixture  # the fixture, under the name the tests ask for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

# Claude Code's documented example command, with a shell step and arguments.
CLAUDE_COMMIT = """\
---
allowed-tools: Bash(git add:*), Bash(git status:*), Bash(git commit:*)
argument-hint: [message]
description: Create a git commit
---

## Context

- Current git status: !`git status --short`
- Current branch: !`git branch --show-current`

## Your task

Based on the above changes, create a single git commit with the message: $ARGUMENTS
"""

# A skill in Anthropic's format, as the anthropics/skills repository lays them out.
CHANGELOG_SKILL = """\
---
name: changelog
description: Keep CHANGELOG.md in the Keep a Changelog format. Use to record a change.
license: Apache-2.0
---

# Changelog

Follow the format in reference/format.md. Add entries under "Unreleased".
"""


def _git_project(project: Path) -> None:
    (project / ".git").rmdir()
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(project)], check=True)
    (project / "new.txt").write_text("new\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_claude_command_copied_as_is_runs_its_shell_steps_and_sends_the_prompt(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    _git_project(project)
    _write(project / ".claude" / "commands" / "commit.md", CLAUDE_COMMIT)
    scripted_server.enqueue(reply("Committed."))

    done = run_cairn("-p", "/commit add the new file")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Committed."
    (request,) = scripted_server.requests
    sent = request.last_user_text()
    status = sent.split("- Current git status: ", 1)[1].split("- Current branch:", 1)[0]
    assert "?? new.txt" in status.splitlines()
    assert "- Current branch: trunk" in sent
    assert sent.rstrip().endswith("create a single git commit with the message: add the new file")
    assert "!`" not in sent


def test_a_command_whose_shell_step_needs_approval_is_refused_by_cairn_p(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    _write(project / ".cairn" / "commands" / "touch.md", "Touched: !`touch touched.txt`")

    done = run_cairn("-p", "/touch")

    assert done.returncode == 1
    assert "/touch was not run" in done.stderr
    assert "non-interactive mode cannot ask" in done.stderr
    assert scripted_server.requests == []
    assert not (project / "touched.txt").exists()


def test_a_qwen_toml_command_copied_as_is_fills_in_its_args(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    _write(
        project / ".qwen" / "commands" / "git" / "explain.toml",
        'description = "Explain a file"\n'
        'prompt = """Explain {{args}} to a newcomer.\nSize: !{wc -c < {{args}}}"""\n',
    )
    (project / "app.py").write_text("print('hi')\n")
    scripted_server.enqueue(reply("It prints hi."))

    done = run_cairn("-p", "/git:explain app.py")

    assert done.returncode == 0, done.stderr
    (request,) = scripted_server.requests
    assert request.last_user_text() == "Explain app.py to a newcomer.\nSize: 12"


def test_the_model_loads_a_claude_skill_folder_copied_as_is(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    skill = project / ".claude" / "skills" / "changelog"
    _write(skill / "SKILL.md", CHANGELOG_SKILL)
    _write(skill / "reference" / "format.md", "## [Unreleased]\n### Added\n")
    scripted_server.enqueue(
        tool_call("skill", {"skill": "changelog"}),
        tool_call("read_file", {"file_path": str(skill / "reference" / "format.md")}),
        reply("Recorded."),
    )

    done = run_cairn("-p", "record that we added dark mode", "-o", "json")

    assert done.returncode == 0, done.stderr
    first, second, third = scripted_server.requests
    assert "- changelog: Keep CHANGELOG.md in the Keep a Changelog format." in (first.system or "")
    assert "skill" in first.tool_names
    tool_results = [m for m in second.messages if m["role"] == "tool"]
    assert 'Skill "changelog"' in tool_results[-1]["content"]
    assert 'Add entries under "Unreleased"' in tool_results[-1]["content"]
    assert "reference/format.md" in tool_results[-1]["content"]
    read = [m for m in third.messages if m["role"] == "tool"][-1]["content"]
    assert "## [Unreleased]" in read
    result = json.loads(done.stdout)[-1]
    assert result["result"] == "Recorded."


def test_a_command_file_with_bad_front_matter_is_skipped_with_one_warning(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    _write(
        project / ".cairn" / "commands" / "bad.md", "---\ndescription: [oops\n  - a: b: c\n---\n"
    )
    scripted_server.enqueue(reply("hello"))

    done = run_cairn("-p", "hi")

    assert done.returncode == 0, done.stderr
    assert done.stderr.count(".cairn/commands/bad.md is skipped") == 1
    assert done.stdout.strip() == "hello"


async def test_acp_offers_file_commands_and_skills_and_runs_them_with_approval(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    _write(
        project / ".cairn" / "commands" / "stamp.md",
        "---\ndescription: Stamp the build\nargument-hint: <label>\n---\n"
        "Stamp $1: !`touch stamp-$1.txt && echo stamped`",
    )
    _write(project / ".claude" / "skills" / "changelog" / "SKILL.md", CHANGELOG_SKILL)
    scripted_server.default = reply("Stamped.")
    async with running_agent(cairn_env, project) as agent:
        session_id = await agent.start_session()
        response = await agent.prompt(session_id, "/stamp v1")

    assert response.stop_reason == "end_turn"
    lists = [u for u in agent.client.updates if isinstance(u, AvailableCommandsUpdate)]
    offered = {c.name: c for c in lists[-1].available_commands}
    assert offered["stamp"].description == "Stamp the build"
    assert offered["stamp"].input is not None
    assert offered["stamp"].input.root.hint == "<label>"  # type: ignore[union-attr]
    assert "changelog" in offered and "skills" in offered
    (asked, _options) = agent.client.permission_requests[0]
    assert "touch stamp-v1.txt" in asked.title
    assert (project / "stamp-v1.txt").exists()
    (request,) = scripted_server.requests_for("main")
    assert request.last_user_text() == "Stamp v1: stamped"


async def test_the_daemon_lists_file_commands_and_skills_and_runs_a_command(
    serve: object, scripted_server: ScriptedServer, project: Path
) -> None:
    _write(
        project / ".cairn" / "commands" / "git" / "note.md",
        "---\ndescription: Note a change\n---\nNote this: $ARGUMENTS",
    )
    _write(project / ".agents" / "skills" / "changelog" / "SKILL.md", CHANGELOG_SKILL)
    scripted_server.enqueue(reply("Noted."), purpose="main")
    served = serve()  # type: ignore[operator]
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        listed = httpx.get(f"{served.url}/session/{session.session_id}/commands").json()
        await session.prompt("/git:note dark mode")
        events = await until(session, "turn_complete")
        await client.close_session(session.session_id)

    offered = {c["name"]: c for c in listed["commands"]}
    assert offered["git:note"]["description"] == "Note a change"
    assert "changelog" in offered and "skills" in offered
    assert events[-1].final_text == "Noted."
    (request,) = scripted_server.requests_for("main")
    assert request.last_user_text() == "Note this: dark mode"
    assert served.stop() == 0
