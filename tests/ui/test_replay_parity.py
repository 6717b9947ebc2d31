"""A conversation redrawn after /resume or /rewind undo reads exactly as it did live."""

from __future__ import annotations

import re

from cairn.testing import ToolCallSpec, reply, tool_call, tool_calls
from cairn.ui.transcript import SubagentView

from .conftest import send, settle, until
from .helpers import screen_text

SIZE = (100, 120)
STATUS_CONTEXT = re.compile(r"context \d+%[^·]*")
SUBAGENT_STEP = "✓ List ."


def conversation(app) -> str:
    """The conversation as drawn (not the prompt box and status line below it), without the
    notice a resume adds at its end."""
    screen = screen_text(app).split(" ╭─")[0]
    lines = [line.rstrip() for line in screen.splitlines()]
    return "\n".join(line for line in lines if line.strip() and "Resumed session" not in line)


async def opened(app, pilot) -> str:
    """The conversation with its subagent block open (its steps and answers shown)."""
    for block in app.query(SubagentView):
        block.collapsed = False
    await until(pilot, lambda: SUBAGENT_STEP in screen_text(app))
    return conversation(app)


def context_share(app) -> str:
    """The status line's "context N% (used/window)"."""
    [share] = STATUS_CONTEXT.findall(screen_text(app))
    return share.strip()


def script_a_busy_session(scripted_server, project) -> None:
    """An edit, a command, a subagent with a step, a custom command and built-in ones."""
    (project / "notes.txt").write_text("alpha\nbeta\n")
    commands = project / ".cairn" / "commands"
    commands.mkdir(parents=True, exist_ok=True)
    (commands / "greet.md").write_text("Say hello to $ARGUMENTS.\n")
    edit = {"file_path": str(project / "notes.txt"), "old_string": "beta", "new_string": "gamma"}
    task = {"description": "notes", "prompt": "Read notes.txt", "subagent_type": "general-purpose"}
    scripted_server.enqueue(
        tool_call("edit", edit),
        tool_call("run_shell_command", {"command": "echo hi"}),
        tool_calls(ToolCallSpec("agent", task, "p1")),
        reply("All done."),
        reply("Hello, world."),
        purpose="main",
    )
    scripted_server.enqueue(
        tool_call("list_directory", {"path": "."}),
        reply("The folder holds notes."),
        reply("SUBAGENT-ANSWER"),
        purpose="subagent",
    )


async def live_session(pilot) -> None:
    for line in ("change notes", "/greet world", "/approval-mode yolo", "/help"):
        await send(pilot, line)
        await settle(pilot)


async def test_a_resumed_conversation_reads_as_it_did_live(make_app, scripted_server, project):
    """Issue #30: after /resume, an agent call's subagent steps and the commands answered
    without the model (their lines and answers) were missing, and the context share read 0 %."""
    script_a_busy_session(scripted_server, project)
    app = make_app(approval_mode="auto-edit")
    async with app.run_test(size=SIZE) as pilot:
        await live_session(pilot)
        live, live_share = await opened(app, pilot), context_share(app)
        session_id = app.session.id

    resumed = make_app(resume=session_id)
    async with resumed.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "Resumed session" in screen_text(resumed))
        assert await opened(resumed, pilot) == live
        assert context_share(resumed) == live_share
    assert "The folder holds notes." in live  # the subagent's answer, in its block
    assert "/approval-mode yolo" in live and "Approval mode set to yolo." in live
    assert live_share.startswith("context 0% (")


async def test_a_conversation_after_rewind_undo_reads_as_it_did_live(
    make_app, scripted_server, project
):
    """Issue #30: the conversation redrawn after /rewind undo differed from the live one,
    and the context share still counted the rewound turns."""
    script_a_busy_session(scripted_server, project)
    app = make_app(approval_mode="auto-edit")
    async with app.run_test(size=SIZE) as pilot:
        await live_session(pilot)
        live, live_share = await opened(app, pilot), context_share(app)
        await send(pilot, "/rewind 1 conversation")
        await settle(pilot)
        await until(pilot, lambda: "All done." not in conversation(app))
        assert context_share(app).startswith("context 0% (0/")  # nothing before the first turn
        await send(pilot, "/rewind undo")
        await settle(pilot)
        await until(pilot, lambda: "All done." in conversation(app))

        *redrawn, undone = (await opened(app, pilot)).splitlines()
        assert "\n".join(redrawn) == live
        assert undone.strip() == "ℹ Undid the last rewind: the conversation is back as it was."
        assert context_share(app) == live_share


async def test_a_command_alone_leaves_no_session_to_resume(make_app, scripted_server):
    """Commands are recorded for the replay once the conversation has begun: typing /help
    and quitting must not leave a session that `cairn --continue` would pick."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/help")
        await settle(pilot)
        path = app.session.recorder.path
        assert "/help — List the slash commands" in screen_text(app)
    assert not path.exists() or path.stat().st_size == 0
