"""The one check on widening what a session may do without asking (session/gate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.session.gate import OPEN_GATE, PermissionGate, WideningRefused
from cairn.testing import ScriptedFrontend, reply, tool_call
from cairn.vocabulary import permission_choices

from .helpers import MakeWorld, World

pytestmark = pytest.mark.timeout(60)

CLOSED = PermissionGate(open=False, closed_because="start the daemon with a token")


@pytest.mark.parametrize(
    ("current", "wanted", "widens"),
    [
        ("default", "yolo", True),
        ("default", "auto-edit", True),
        ("plan", "default", True),
        ("yolo", "default", False),
        ("auto-edit", "plan", False),
        ("default", "default", False),
        ("default", "no-such-mode", True),
    ],
)
def test_a_closed_gate_refuses_exactly_the_wider_modes(
    current: str, wanted: str, widens: bool
) -> None:
    OPEN_GATE.check_mode(current, wanted)
    if widens:
        with pytest.raises(WideningRefused, match="start the daemon with a token"):
            CLOSED.check_mode(current, wanted)
    else:
        CLOSED.check_mode(current, wanted)


def test_a_closed_gate_refuses_what_rewrites_files_without_asking() -> None:
    OPEN_GATE.check_unasked("Rewinding")
    with pytest.raises(WideningRefused, match="Rewinding rewrites files without asking: start"):
        CLOSED.check_unasked("Rewinding")


def enqueue_two_touches(world: World) -> None:
    """The model runs `touch a`, then `touch b`: one program, asked about twice unless an
    "always" answer was kept."""
    world.provider.enqueue(
        tool_call("run_shell_command", {"command": "touch a"}, id="s1"),
        tool_call("run_shell_command", {"command": "touch b"}, id="s2"),
        reply("done"),
        purpose="main",
    )


async def test_a_closed_session_cannot_start_or_be_set_wider_than_its_settings(
    make_world: MakeWorld,
) -> None:
    world = make_world()

    with pytest.raises(WideningRefused):
        world.runtime.new_session(approval_mode="yolo", gate=CLOSED)
    session = world.runtime.new_session(approval_mode="plan", gate=CLOSED)
    with pytest.raises(WideningRefused):
        await session.set_approval_mode("auto-edit")
    await session.set_approval_mode("plan")
    world.sessions.append(session)

    assert session.approval_mode == "plan"
    recorded = [p.stem for p in world.runtime.chats_dir.glob("*.jsonl")]
    assert recorded in ([], [session.id])  # the refused one left no recording


async def test_approval_mode_command_explains_the_refusal(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.runtime.new_session(gate=CLOSED)
    world.sessions.append(session)

    result = await world.prompt(session, "/approval-mode yolo")

    assert session.approval_mode == "default"
    assert "widens what the agent may do" in result.text
    assert world.provider.requests == []


async def test_behind_a_closed_gate_allow_always_is_not_offered_and_counts_once(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world()
    enqueue_two_touches(world)
    user = ScriptedFrontend(permissions=["allow_always", "allow_once"])
    session = world.runtime.new_session(frontend=user, gate=CLOSED)
    world.sessions.append(session)

    await world.prompt(session, "touch both")

    first, _again = user.permission_requests  # asked again: "always" was not remembered
    assert first.allow_always is False
    assert [c.id for c in permission_choices(first)] == ["allow_once", "reject_once"]
    assert (project / "a").exists() and (project / "b").exists()


async def test_behind_a_closed_gate_a_settings_change_is_refused_without_asking(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world()
    change = {
        "file_path": ".cairn/settings.json",
        "content": '{"permissions": {"allow": ["Bash"]}}',
    }
    world.provider.enqueue(tool_call("write_file", change), reply("done"), purpose="main")
    user = ScriptedFrontend(default_permission="allow_once")
    session = world.runtime.new_session(frontend=user, approval_mode="default", gate=CLOSED)
    world.sessions.append(session)

    await world.prompt(session, "loosen the rules")

    assert user.permission_requests == []
    assert not (project / ".cairn" / "settings.json").exists()


async def test_an_open_gate_changes_nothing(make_world: MakeWorld, project: Path) -> None:
    world = make_world()
    enqueue_two_touches(world)
    user = ScriptedFrontend(permissions=["allow_always"])
    session = world.session(frontend=user, approval_mode="yolo")
    await session.set_approval_mode("default")

    await world.prompt(session, "touch both")

    [only] = user.permission_requests  # "always" was remembered for touch
    assert only.allow_always is True
