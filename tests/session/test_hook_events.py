"""Hook events in a real session: a PostToolUse `continue: false` ends the turn, SessionStart
runs again after /clear, and /clear ends the old conversation for SessionEnd."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cairn.testing import reply, tool_call
from cairn.vocabulary.events import Notice

from ..polling import eventually_async
from .helpers import MakeWorld


def hook_on(tmp_path: Path, events: list[str], answer: dict[str, Any]) -> dict[str, Any]:
    """Hooks settings running one Python script on ``events``: it logs each event and prints
    ``answer``."""
    script = tmp_path / "hook.py"
    log = tmp_path / "hooks.jsonl"
    script.write_text(
        "import json, sys\n"
        f"event = json.load(sys.stdin)\nopen({str(log)!r}, 'a').write(json.dumps(event) + '\\n')\n"
        f"print({json.dumps(json.dumps(answer))})\n"
    )
    group = [{"hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]
    return {event: group for event in events}


def logged(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "hooks.jsonl").read_text().splitlines()]


async def test_a_post_tool_use_continue_false_ends_the_turn_after_the_call(
    make_world: MakeWorld, tmp_path: Path
) -> None:
    answer = {"continue": False, "stopReason": "the build is broken"}
    world = make_world(hooks=hook_on(tmp_path, ["PostToolUse"], answer))
    world.provider.enqueue(tool_call("list_directory", {"path": "."}), reply("never sent"))
    session = world.session()

    await world.prompt(session, "look")

    assert len(world.main_requests()) == 1  # the result was not sent back to the model
    stops = [e for e in world.events if isinstance(e, Notice) and e.source == "hook"]
    assert [n.text for n in stops] == ["A hook stopped the turn: the build is broken"]
    again = await world.prompt(session, "and now?")
    assert again.stop_reason == "end_turn"  # the next turn's history is well formed


async def test_clear_ends_the_conversation_and_starts_another_for_the_hooks(
    make_world: MakeWorld, tmp_path: Path
) -> None:
    world = make_world(hooks=hook_on(tmp_path, ["SessionStart", "SessionEnd"], {}))
    session = world.session()

    await world.prompt(session, "hi")
    await world.prompt(session, "/clear")

    assert [
        (e["hook_event_name"], e.get("source") or e.get("reason")) for e in logged(tmp_path)
    ] == [
        ("SessionStart", "startup"),
        ("SessionEnd", "clear"),
        ("SessionStart", "clear"),
    ]


async def test_an_async_hooks_context_comes_with_the_next_prompt(
    make_world: MakeWorld, tmp_path: Path
) -> None:
    """Issue #30: `async` hooks run in the background; what they say reaches the model with the
    next prompt (as in Claude Code), and nothing waits for them."""
    answer = {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "AUDITED"}
    }
    hooks = hook_on(tmp_path, ["PostToolUse"], answer)
    hooks["PostToolUse"][0]["hooks"][0]["async"] = True
    world = make_world(hooks=hooks)
    world.provider.enqueue(
        tool_call("list_directory", {"path": "."}), reply("Listed."), reply("ok")
    )
    session = world.session()

    await world.prompt(session, "look")
    assert await eventually_async(lambda: (tmp_path / "hooks.jsonl").exists())
    assert await eventually_async(lambda: session.hooks.background_running == 0)
    await world.prompt(session, "next")

    first_turn = [r.contents[-1].text for r in world.main_requests()[:2]]
    assert not any("AUDITED" in text for text in first_turn)
    assert "AUDITED" in world.last_main().contents[-1].text


async def test_what_session_start_hooks_export_reaches_shell_commands_only(
    make_world: MakeWorld, tmp_path: Path
) -> None:
    """Issue #30: CLAUDE_ENV_FILE; a /clear runs SessionStart again and its exports replace
    the earlier ones."""
    script = tmp_path / "env.sh"
    script.write_text(
        '#!/usr/bin/env bash\necho "export STAGE=$(cat '
        + str(tmp_path / "stage")
        + ')" >> "$CLAUDE_ENV_FILE"\n'
    )
    script.chmod(0o755)
    (tmp_path / "stage").write_text("one")
    world = make_world(hooks={"SessionStart": [{"hooks": [{"command": str(script)}]}]})
    session = world.session()

    await world.prompt(session, "hi")
    assert session.workspace.shell_environment()["STAGE"] == "one"
    (tmp_path / "stage").write_text("two")
    await world.prompt(session, "/clear")
    await world.prompt(session, "again")

    assert session.workspace.shell_environment()["STAGE"] == "two"
    assert "STAGE" not in session.workspace.environment  # hooks and MCP servers do not get it
