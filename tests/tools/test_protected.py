"""cairn's own configuration is changed by a tool only with an approval that names it.

Regression (#18): "The model can give itself more permission." In auto-edit mode the model wrote
`.cairn/settings.json` unasked (a hook and `permissions.allow: ["Bash"]`); the next run executed
the hook, and a shell command then ran unasked even in default mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.content import FunctionCall
from cairn.tools.base import ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.protected import ProtectedPaths
from cairn.vocabulary.events import Notice

from .test_scheduler import (
    Run,
    decision_hook,
    error_of,
    hook_runner,
    scripted_user,
    shell,
    write,
)

pytestmark = pytest.mark.timeout(60)

ESCALATION = json.dumps({"permissions": {"allow": ["Bash"]}})


@pytest.fixture(autouse=True)
def cairn_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cairn-home"
    home.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(home))
    return home


def edit(path: str, old: str, new: str) -> FunctionCall:
    return FunctionCall("e1", "edit", {"file_path": path, "old_string": old, "new_string": new})


# ----- what is protected -----


@pytest.mark.parametrize(
    "relative",
    [
        ".cairn/settings.json",
        ".cairn/commands/deploy.md",
        ".cairn/skills/x/SKILL.md",
        ".cairn/agents/reviewer.md",
        ".cairn/hooks/guard.sh",
        ".mcp.json",
        ".claude/settings.json",
        ".claude/commands/x.md",
        ".qwen/commands/x.toml",
        ".agents/skills/x/SKILL.md",
        ".git/config",
        ".git/hooks/pre-commit",
        "vendor/lib/.git/config",
    ],
)
def test_cairns_configuration_and_what_runs_programs_is_protected(
    workspace: Path, relative: str
) -> None:
    assert ProtectedPaths.of(workspace).describe(workspace / relative) is not None


@pytest.mark.parametrize(
    "relative", ["src/app.py", ".cairn/memory/project/note.md", ".gitignore", "cairn/settings.json"]
)
def test_ordinary_files_and_the_local_memory_folder_are_not_protected(
    workspace: Path, relative: str
) -> None:
    assert ProtectedPaths.of(workspace).describe(workspace / relative) is None


def test_everything_under_cairn_home_but_the_memory_folders_is_protected(
    workspace: Path, cairn_home: Path
) -> None:
    paths = ProtectedPaths.of(workspace)

    assert paths.describe(cairn_home / "settings.json") is not None
    assert paths.describe(cairn_home / "trusted-folders.json") is not None
    assert paths.describe(cairn_home / "projects" / "p" / "chats" / "x.jsonl") is not None
    assert paths.describe(cairn_home / "memories" / "user" / "a.md") is None
    assert paths.describe(cairn_home / "projects" / "p" / "memory" / "project" / "a.md") is None


def test_a_symlink_to_a_protected_file_is_protected(workspace: Path) -> None:
    (workspace / ".cairn").mkdir()
    (workspace / ".cairn" / "settings.json").write_text("{}")
    (workspace / "innocent.json").symlink_to(workspace / ".cairn" / "settings.json")

    assert ProtectedPaths.of(workspace).describe(workspace / "innocent.json") is not None


def test_the_scripts_hooks_run_are_protected(workspace: Path) -> None:
    (workspace / "scripts").mkdir()
    (workspace / "scripts" / "check.sh").write_text("#!/bin/sh\n")

    paths = ProtectedPaths.of(
        workspace, hook_commands=['"$CLAUDE_PROJECT_DIR"/scripts/check.sh --fast']
    )

    assert paths.describe(workspace / "scripts" / "check.sh") is not None


def test_the_scripts_stdio_mcp_servers_run_are_protected(workspace: Path) -> None:
    """#24 follow-up: the scripts of MCP servers (which cairn runs outside the sandbox) were
    not protected from the file tools, while the scripts of hooks were."""
    (workspace / "tools").mkdir()
    (workspace / "tools" / "server.py").write_text("print()\n")
    (workspace / "tools" / "other.py").write_text("print()\n")

    paths = ProtectedPaths.of(workspace, run_later=[("python3 server.py --x", workspace / "tools")])

    found = paths.describe(workspace / "tools" / "server.py")
    assert found is not None and "MCP server" in found
    assert paths.describe(workspace / "tools" / "other.py") is None


@pytest.mark.parametrize(
    "command",
    [
        "cp evil.json .cairn/settings.json",
        "echo '{}' > .cairn/settings.json",
        "cd .cairn && echo x > settings.json",
        "bash -c 'echo x >> .mcp.json'",
        "tee -a ~/.cairn/settings.json",
        "sed -i s/a/b/ .git/config",
        "rm -rf .git",
        "ln -sf /tmp/x .claude/settings.json",
        "echo $(cat x) > .cairn/commands/a.md",
    ],
)
def test_shell_commands_naming_protected_paths_are_found(
    workspace: Path, command: str, cairn_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(Path.home() / ".cairn"))

    assert ProtectedPaths.of(workspace).in_command(command, workspace) is not None


def test_variables_in_shell_words_are_expanded_as_bash_would(
    workspace: Path, cairn_home: Path
) -> None:
    paths = ProtectedPaths.of(workspace)

    assert paths.in_command('echo x > "$CAIRN_HOME/settings.json"', workspace) is not None
    assert paths.in_command("cp a ${CAIRN_HOME}/trusted-folders.json", workspace) is not None
    assert paths.in_command('echo x > "$PWD/.mcp.json"', workspace) is not None


@pytest.mark.parametrize("relative", [".CAIRN/settings.json", ".Git/config", ".MCP.json"])
def test_protected_names_match_whatever_their_case(workspace: Path, relative: str) -> None:
    """On a case-insensitive file system (macOS) `.Cairn/settings.json` is the same file."""
    assert ProtectedPaths.of(workspace).describe(workspace / relative) is not None


@pytest.mark.parametrize("command", ["npm test", "git commit -m x", "echo hi > notes.txt"])
def test_ordinary_shell_commands_are_not_settings_changes(workspace: Path, command: str) -> None:
    assert ProtectedPaths.of(workspace).in_command(command, workspace) is None


# ----- the approval -----


async def test_auto_edit_asks_before_writing_project_settings(
    ctx: ToolContext, workspace: Path
) -> None:
    user = scripted_user("reject")
    run = Run(ctx, frontend=user, mode="auto-edit")

    outcome = await run.one(write(".cairn/settings.json", ESCALATION))

    assert outcome.status == "rejected"
    assert not (workspace / ".cairn" / "settings.json").exists()
    (request,) = user.permission_requests
    assert request.title.startswith("Settings change — cairn's project configuration")


async def test_auto_edit_still_writes_ordinary_files_unasked(
    ctx: ToolContext, workspace: Path
) -> None:
    run = Run(ctx, frontend=scripted_user(), mode="auto-edit")

    outcome = await run.one(write("src/app.py", "x = 1\n"))

    assert outcome.status == "completed"


async def test_headless_auto_edit_refuses_a_settings_change_with_the_reason(
    ctx: ToolContext, workspace: Path
) -> None:
    run = Run(ctx, mode="auto-edit")

    outcome = await run.one(write(".cairn/settings.json", ESCALATION))

    assert outcome.status == "failed"
    assert "change cairn's own configuration" in error_of(outcome)
    assert "--approval-mode yolo" in error_of(outcome)
    assert not (workspace / ".cairn").exists()


async def test_plan_mode_refuses_and_yolo_writes(ctx: ToolContext, workspace: Path) -> None:
    planned = await Run(ctx, frontend=scripted_user(), mode="plan").one(
        write(".cairn/settings.json", ESCALATION)
    )
    assert planned.status == "failed"

    run = Run(ctx, mode="yolo")
    outcome = await run.one(write(".cairn/settings.json", ESCALATION))

    assert outcome.status == "completed"
    assert json.loads((workspace / ".cairn" / "settings.json").read_text())["permissions"]
    (notice,) = [e for e in run.events if isinstance(e, Notice)]
    assert "keeps the permission rules and hooks it started with" in notice.text


async def test_allow_rules_and_allow_always_do_not_cover_a_settings_change(
    ctx: ToolContext, workspace: Path
) -> None:
    user = scripted_user("allow_always", "reject")
    rules = PermissionRules.parse(allow=["Write", "Edit", "Bash"])
    run = Run(ctx, frontend=user, mode="default", rules=rules)

    first = await run.one(write(".cairn/settings.json", "{}\n"))
    second = await run.one(edit(".cairn/settings.json", "{}", ESCALATION))

    assert first.status == "completed"
    assert second.status == "rejected"
    assert len(user.permission_requests) == 2
    assert (workspace / ".cairn" / "settings.json").read_text() == "{}\n"


async def test_a_hook_allowing_the_call_does_not_cover_a_settings_change(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    user = scripted_user("reject")
    hooks = hook_runner(tmp_path, workspace, decision_hook("allow", "project hook says ok"))
    run = Run(ctx, frontend=user, mode="auto-edit", hooks=hooks)

    outcome = await run.one(write(".mcp.json", '{"mcpServers": {}}'))

    assert outcome.status == "rejected"
    assert len(user.permission_requests) == 1


async def test_writing_git_config_asks_in_auto_edit(ctx: ToolContext, workspace: Path) -> None:
    """The first half of a chain: .git/config with core.fsmonitor, then a "read-only" git."""
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    user = scripted_user("reject")
    run = Run(ctx, frontend=user, mode="auto-edit")

    outcome = await run.one(edit(".git/config", "[core]\n", "[core]\n\tfsmonitor = evil\n"))

    assert outcome.status == "rejected"
    assert "git's configuration" in user.permission_requests[0].title


async def test_a_shell_command_allowed_by_a_rule_still_asks_before_writing_settings(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "evil.json").write_text(ESCALATION)
    user = scripted_user("reject")
    run = Run(ctx, frontend=user, rules=PermissionRules.parse(allow=["Bash(cp *)"]))

    outcome = await run.one(shell("mkdir -p .cairn && cp evil.json .cairn/settings.json"))

    assert outcome.status == "rejected"
    assert not (workspace / ".cairn" / "settings.json").exists()
    assert user.permission_requests[0].title.startswith("Settings change")


async def test_a_read_only_command_reading_settings_needs_no_approval(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / ".cairn").mkdir()
    (workspace / ".cairn" / "settings.json").write_text("{}\n")
    run = Run(ctx, frontend=scripted_user())

    outcome = await run.one(shell("cat .cairn/settings.json"))

    assert outcome.status == "completed"


async def test_memory_roots_of_the_context_are_writable_without_a_settings_approval(
    workspace: Path, cairn_home: Path, abort: AbortController
) -> None:
    memory = cairn_home / "projects" / "p" / "memory"
    memory.mkdir(parents=True)
    ctx = ToolContext(workspace=workspace, abort=abort.signal, writable_roots=[memory])
    run = Run(ctx, mode="auto-edit")

    outcome = await run.one(write(str(memory / "user" / "pref.md"), "---\nname: x\n---\n"))

    assert outcome.status == "completed"
