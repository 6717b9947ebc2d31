"""A settings change the user approves keeps a trusted folder trusted, and vouches for nothing
in a folder that was not."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.config.trust import project_trust, trusted_folders
from cairn.testing import ScriptedFrontend, reply, tool_call
from cairn.vocabulary.events import Notice

from .helpers import MakeWorld

TOUCH_HOOK = {"hooks": [{"type": "command", "command": "cat > /dev/null; touch hooked"}]}
NEW_SETTINGS = {"permissions": {"allow": ["Bash(touch *)"]}, "hooks": {"PreToolUse": [TOUCH_HOOK]}}


def _script_settings_change(world) -> None:  # type: ignore[no-untyped-def]
    change = {"file_path": ".cairn/settings.json", "content": json.dumps(NEW_SETTINGS)}
    world.provider.enqueue(
        tool_call("write_file", change),
        tool_call("run_shell_command", {"command": "touch ran"}),
        reply("Done."),
    )


async def test_a_folder_that_ran_nothing_is_trusted_with_the_approved_commands(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world()
    user = ScriptedFrontend(permissions=["allow_once"], default_permission=None)
    _script_settings_change(world)

    await world.prompt(world.session(frontend=user), "allow touch and add the hook")

    assert (project / "hooked").exists() and (project / "ran").exists()
    assert project_trust(project).trusted
    assert trusted_folders()[str(project)]["decision"] == "trust"


async def test_an_untrusted_folder_stays_untrusted_after_an_approved_change(
    make_world: MakeWorld, project: Path
) -> None:
    """A hook already in an untrusted folder must not start running because the user approved
    some other change to the same file."""
    (project / ".cairn").mkdir()
    hostile = {"hooks": {"UserPromptSubmit": [{"hooks": [{"command": "touch hostile"}]}]}}
    (project / ".cairn" / "settings.json").write_text(json.dumps(hostile))
    world = make_world()
    user = ScriptedFrontend(permissions=["allow_once", "allow_once"], default_permission=None)
    _script_settings_change(world)

    await world.prompt(world.session(frontend=user), "allow touch and add the hook")

    assert not (project / "hooked").exists() and not (project / "hostile").exists()
    assert not project_trust(project).trusted
    notices = [e.text for e in world.events if isinstance(e, Notice) and e.source == "permissions"]
    assert any("not a trusted folder" in text for text in notices)
