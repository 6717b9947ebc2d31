"""Issue #30: Claude Code's own published examples (anthropics/claude-code) run unchanged in
cairn: its example hooks, a plugin's command and a plugin's agent, each from a project's
`.claude/` folder through the real ``cairn -p``.

That repository's licence does not allow copying them here, so these tests read them from a
checkout named by ``CLAUDE_CODE_REPO`` (a work tree or a bare clone) and are skipped without
one; tests/e2e/test_claude_code_hooks.py runs scripts written to the same documented contract
in every run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cairn.testing import RecordedRequest, ScriptedServer, reply, tool_call

from .conftest import RunCairn, trust_in_user_settings

REPO = os.environ.get("CLAUDE_CODE_REPO", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not REPO, reason="CLAUDE_CODE_REPO names no anthropics/claude-code"),
    pytest.mark.skipif(shutil.which("jq") is None, reason="the example hooks use jq"),
]

BASH_VALIDATOR = "examples/hooks/bash_command_validator_example.py"
HOOK_EXAMPLES = "plugins/plugin-dev/skills/hook-development/examples"
COMMIT_COMMAND = "plugins/commit-commands/commands/commit.md"
CODE_REVIEWER = "plugins/feature-dev/agents/code-reviewer.md"


def published(path: str) -> str:
    """The text of ``path`` in the Claude Code checkout, as published."""
    repo = Path(REPO)
    if (repo / path).is_file():
        return (repo / path).read_text(encoding="utf-8")
    return subprocess.run(  # a bare clone
        ["git", "--git-dir", str(repo), "show", f"HEAD:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def install(project: Path, path: str, into: str) -> Path:
    """``path`` copied unchanged into the project's ``.claude/<into>/``."""
    target = project / ".claude" / into / Path(path).name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(published(path), encoding="utf-8")
    target.chmod(0o755)
    return target


def claude_hooks(project: Path, hooks: dict[str, Any]) -> None:
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}, indent=2))
    trust_in_user_settings(project)


def command_hook(script: str) -> dict[str, Any]:
    return {"type": "command", "command": f'"$CLAUDE_PROJECT_DIR"/.claude/hooks/{script}'}


def results(request: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


def test_the_published_bash_validator_blocks(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """examples/hooks/bash_command_validator_example.py: exit 2 and its reasons on stderr."""
    install(project, BASH_VALIDATOR, "hooks")
    claude_hooks(
        project,
        {
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [
                        {
                            "type": "command",
                            "command": 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/'
                            "bash_command_validator_example.py",
                        }
                    ],
                }
            ]
        },
    )
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "grep -r TODO ."}, id="g"),
        tool_call("run_shell_command", {"command": "find . -name '*.py'"}, id="f"),
        reply("Done."),
        purpose="main",
    )

    done = run_cairn("-p", "look", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    said = results(scripted_server.requests_for("main")[-1])
    assert "Use 'rg' (ripgrep) instead of 'grep'" in said["g"]
    assert "rg --files" in said["f"]


def test_the_published_validate_bash_and_validate_write_hooks_guard(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """plugin-dev's validate-bash.sh and validate-write.sh: `rm -rf` and a write to `.env` are
    refused (exit 2, the reason on stderr reaches the model); `ls` and an ordinary write run."""
    install(project, f"{HOOK_EXAMPLES}/validate-bash.sh", "hooks")
    install(project, f"{HOOK_EXAMPLES}/validate-write.sh", "hooks")
    claude_hooks(
        project,
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [command_hook("validate-bash.sh")]},
                {"matcher": "Write|Edit", "hooks": [command_hook("validate-write.sh")]},
            ]
        },
    )
    (project / "build").mkdir()
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "rm -rf build"}, id="rm"),
        tool_call("run_shell_command", {"command": "ls"}, id="ls"),
        tool_call("write_file", {"file_path": ".env", "content": "KEY=1\n"}, id="env"),
        tool_call("write_file", {"file_path": "notes.txt", "content": "hi\n"}, id="notes"),
        reply("Done."),
        purpose="main",
    )

    done = run_cairn("-p", "tidy up", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    said = results(scripted_server.requests_for("main")[-1])
    assert "Dangerous command detected: rm -rf" in said["rm"]
    assert (project / "build").is_dir()
    assert "build" in said["ls"]
    assert "Writing to potentially sensitive file" in said["env"]
    assert not (project / ".env").exists()
    assert (project / "notes.txt").read_text() == "hi\n"


def test_the_published_load_context_hook_exports_to_later_commands(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """plugin-dev's load-context.sh: a SessionStart hook writing exports to $CLAUDE_ENV_FILE
    from $CLAUDE_PROJECT_DIR; the session's shell commands see them."""
    install(project, f"{HOOK_EXAMPLES}/load-context.sh", "hooks")
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    claude_hooks(project, {"SessionStart": [{"hooks": [command_hook("load-context.sh")]}]})
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": 'echo "type=$PROJECT_TYPE"'}, id="t"),
        reply("Python."),
        purpose="main",
    )

    done = run_cairn("-p", "what kind of project?", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    assert "type=python" in results(scripted_server.requests_for("main")[-1])["t"]


def test_the_published_commit_command_runs_with_its_context_and_grants(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    cairn_env: dict[str, str],
) -> None:
    """commit-commands' /commit: its !`git status` context reaches the model and its
    allowed-tools let the commit run without a question (in default approval mode)."""
    shutil.rmtree(project / ".git")
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], cwd=project, check=True)
    (project / "feature.txt").write_text("new\n")
    install(project, COMMIT_COMMAND, "commands")
    trust_in_user_settings(project)
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "git add feature.txt && git commit -q -m add"}),
        reply("Committed."),
        purpose="main",
    )
    who = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com"}
    who |= {"GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}

    done = run_cairn("-p", "/commit", "--approval-mode", "default", env={**cairn_env, **who})

    assert done.returncode == 0, done.stderr
    first = scripted_server.requests_for("main")[0]
    assert "feature.txt" in first.last_user_text()  # the git status it ran
    assert "create a single git commit" in first.last_user_text()
    log = subprocess.run(
        ["git", "log", "--oneline", "-1"], cwd=project, capture_output=True, text=True, check=True
    )
    assert log.stdout.strip().endswith(" add")


def test_the_published_code_reviewer_agent_runs_with_its_prompt_and_tools(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """feature-dev's code-reviewer agent: offered as a subagent type; its run gets its
    instructions and only its tools (Claude Code's names mapped to cairn's)."""
    install(project, CODE_REVIEWER, "agents")
    trust_in_user_settings(project)
    task = {"description": "review", "prompt": "Review main.py", "subagent_type": "code-reviewer"}
    scripted_server.enqueue(tool_call("agent", task, id="a"), reply("Reviewed."), purpose="main")
    scripted_server.enqueue(reply("No issues."), purpose="subagent")

    done = run_cairn("-p", "review my code", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    [run] = scripted_server.requests_for("subagent")
    assert "You are an expert code reviewer" in run.messages[0]["content"]
    tools = {t["function"]["name"] for t in run.tools}
    assert {"glob", "grep_search", "read_file"} <= tools
    assert "run_shell_command" not in tools and "write_file" not in tools
    assert "No issues." in results(scripted_server.requests_for("main")[-1])["a"]
