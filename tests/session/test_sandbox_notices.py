"""What a session says about a sandboxed command that tries to change protected files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cairn.testing import ScriptedFrontend, reply, tool_call
from cairn.vocabulary.events import Notice

from .helpers import MakeWorld

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


async def test_a_blocked_write_to_git_hooks_is_not_reported_as_changed_with_approval(
    make_world: MakeWorld, project: Path
) -> None:
    """Regression (issue 30): the sandbox said a blocked write to `.git/hooks` "was changed with
    your approval" (the user had approved it as a settings change the sandbox then refused)."""
    (project / ".git" / "hooks").mkdir()
    world = make_world(tools={"sandbox": {"enabled": True}})
    user = ScriptedFrontend(permissions=["allow_once"], default_permission=None)
    world.provider.enqueue(
        tool_call("run_shell_command", {"command": "echo evil > .git/hooks/pre-commit"}),
        reply("Done."),
    )

    await world.prompt(world.session(frontend=user), "add a pre-commit hook")

    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    notices = [e.text for e in world.events if isinstance(e, Notice)]
    assert not any("was changed" in text for text in notices), notices
    assert "Read-only file system" in str(world.last_main().contents)
