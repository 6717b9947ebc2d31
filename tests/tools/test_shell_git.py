"""Read-only git against a hostile repository: real git, real `.git/config`, real programs.

The hostile config names a script that leaves a marker file when git runs it; a test passes only
when the marker never appears.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.tools.base import ToolContext
from cairn.tools.shell import ShellTool
from cairn.tools.shell_git import neutral_git_env
from cairn.values import replace

pytestmark = pytest.mark.timeout(60)

tool = ShellTool()


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def hostile(workspace: Path, tmp_path: Path) -> Path:
    """The workspace as a git repo whose config and hooks run a marker-writing script."""
    marker_script = tmp_path / "evil.sh"
    marker_script.write_text(f'#!/bin/sh\necho "$1" >> "{tmp_path}/ran"\ncat\n')
    marker_script.chmod(0o755)
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "init", "-q")
    git(workspace, "config", "user.email", "t@example.com")
    git(workspace, "config", "user.name", "t")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "init")
    (workspace / "a.txt").write_text("two\n")  # a change for status and diff to see
    git(workspace, "config", "core.fsmonitor", f"{marker_script} fsmonitor")
    git(workspace, "config", "core.pager", f"{marker_script} pager")
    git(workspace, "config", "log.showSignature", "true")
    git(workspace, "config", "gpg.program", f"{marker_script} gpg")
    git(workspace, "config", "core.sshCommand", f"{marker_script} ssh")
    git(workspace, "remote", "add", "origin", "ssh://example.invalid/repo.git")
    hook = workspace / ".git" / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\n{marker_script} hook\n")
    hook.chmod(0o755)
    return tmp_path / "ran"


def ran(marker: Path) -> list[str]:
    return marker.read_text().split() if marker.exists() else []


@pytest.mark.parametrize("command", ["git status", "git log -1", "git show --stat", "git diff"])
async def test_read_only_git_runs_unasked_without_the_repository_programs(
    command: str, hostile: Path, ctx: ToolContext
) -> None:
    """Regression (#18): `git status` ran `core.fsmonitor` unasked in default mode (and the
    pager, gpg for log.showSignature, the post-index-change hook)."""
    assert tool.confirmation({"command": command}, ctx) is None

    result = await tool.execute({"command": command}, replace(ctx, approval="unasked"))

    assert result.error is None, result.error
    assert ran(hostile) == []


async def test_the_same_git_command_approved_by_the_user_runs_the_config(
    hostile: Path, ctx: ToolContext
) -> None:
    """The neutral config is for commands nobody approved; an approved one is git as usual."""
    await tool.execute({"command": "git status"}, replace(ctx, approval="user"))

    assert "fsmonitor" in ran(hostile)


async def test_git_run_unasked_cannot_reach_a_remote(hostile: Path, ctx: ToolContext) -> None:
    """Regression (#18): `git remote show` ran `core.sshCommand`. It is not read-only now,
    and git run unasked has every transport switched off anyway."""
    assert tool.confirmation({"command": "git remote show origin"}, ctx) == "exec"

    result = await tool.execute(
        {"command": "git ls-remote origin"}, replace(ctx, approval="unasked")
    )

    assert result.output is not None and "Exit code: 0" not in result.output
    assert ran(hostile) == []


async def test_abbreviated_git_options_ask_and_leave_the_config_alone(
    workspace: Path, ctx: ToolContext
) -> None:
    """Regression (#18): `git branch --unset-up` and `--set-upstream-t=other` passed the
    read-only check and changed .git/config."""
    git(workspace, "init", "-q")
    git(workspace, "config", "user.email", "t@example.com")
    git(workspace, "config", "user.name", "t")
    git(workspace, "commit", "-q", "--allow-empty", "-m", "init")
    git(workspace, "branch", "other")

    for command in ["git branch --unset-up", "git branch --set-upstream-t=other"]:
        assert tool.confirmation({"command": command}, ctx) == "exec"


def test_neutral_env_keeps_the_users_own_command_line_config() -> None:
    env = neutral_git_env(
        {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "me",
         "GIT_EXTERNAL_DIFF": "evil", "PATH": "/bin"}
    )  # fmt: skip

    assert env["GIT_CONFIG_KEY_0"] == "user.name"
    assert env["GIT_CONFIG_KEY_1"] == "core.fsmonitor"
    assert int(env["GIT_CONFIG_COUNT"]) > 2
    assert "GIT_EXTERNAL_DIFF" not in env
    assert env["GIT_OPTIONAL_LOCKS"] == "0"
    assert env["PATH"] == "/bin"


# Property: whatever a config file says, if git itself reads a program-running key from it,
# the scanner reports a hazard (it may report more; never less).

_DANGEROUS = re.compile(
    r"^(diff\.[^.]+\.(textconv|command)|diff\.external|filter\.[^.]+\.(clean|smudge|process)"
    r"|merge\.[^.]+\.driver|core\.worktree|include\.path|includeif\..*)$"
)
_SECTIONS = st.sampled_from(
    ['[core]', '[diff "x"]', "[diff.y]", '[filter "lfs"]', "[merge]", '[merge "m"]', "[include]",
     '[includeIf "gitdir:/"]', "[user]", '[remote "origin"]', "[ diff ]", '[Diff "Z"]', "[alias]"]
)  # fmt: skip
_KEYS = st.sampled_from(
    ["textconv", "command", "external", "clean", "smudge", "process", "driver", "worktree",
     "path", "name", "email", "url", "TextConv", "editor", "st"]
)  # fmt: skip
_VALUES = st.sampled_from(["x", '"a b"', "y \\", "z # c", "; q", "", "true", "a=b"])


@st.composite
def _config_text(draw: st.DrawFn) -> str:
    lines: list[str] = []
    lines.append(draw(_SECTIONS))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.integers(0, 9))
        if kind < 3:
            lines.append(draw(_SECTIONS))
        elif kind == 9:
            lines.append(draw(st.sampled_from(["# comment", "; note", "", "\t", "junk ["])))
        else:
            indent = draw(st.sampled_from(["", "\t", "  "]))
            lines.append(f"{indent}{draw(_KEYS)} = {draw(_VALUES)}")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(text=_config_text())
def test_every_program_key_git_reads_is_found(
    text: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from cairn.tools.shell_git import _file_hazard

    config = tmp_path_factory.mktemp("cfg") / "config"
    config.write_text(text)
    listed = subprocess.run(
        ["git", "config", "--file", str(config), "--list", "--name-only"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(config.parent)},
    )
    dangerous = [k for k in listed.stdout.splitlines() if _DANGEROUS.match(k.lower())]

    if dangerous:
        assert _file_hazard(config) is not None, (text, dangerous)
