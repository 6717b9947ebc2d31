"""Hook events in a real session: a PostToolUse `continue: false` ends the turn, SessionStart
runs again after /clear, and /clear ends the old conversation for SessionEnd."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cairn.testing import reply, tool_call
from cairn.vocabulary.events import Notice

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
