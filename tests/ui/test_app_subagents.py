"""A subagent's work is shown under its agent call, in a block that opens and closes."""

from __future__ import annotations

from cairn.testing import ToolCallSpec, reply, tool_call, tool_calls
from cairn.ui.transcript import SubagentView, ToolCallView

from .conftest import send, settle
from .helpers import screen_text

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw


async def test_a_subagents_steps_show_collapsed_under_its_call_and_open_on_click(
    make_app, scripted_server
):
    args = {"description": "notes", "prompt": "Read notes.txt", "subagent_type": "general-purpose"}
    scripted_server.enqueue(tool_calls(ToolCallSpec("agent", args, "p1")), purpose="main")
    scripted_server.enqueue(reply("The notes say hello."), purpose="main")
    scripted_server.enqueue(
        tool_call("list_directory", {"path": "docs-folder"}),
        reply("SUBAGENT-ANSWER"),
        purpose="subagent",
    )
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "what do the notes say?")
        await settle(pilot)

        [call] = [v for v in app.query(ToolCallView) if v.tool_name == "agent"]
        [block] = call.query(SubagentView)
        assert block.collapsed
        assert block.title.startswith("general-purpose: 1 tool call")
        assert "List docs-folder" in block.title  # the latest step, while collapsed
        assert "✗ List docs-folder" not in screen_text(app)
        block.collapsed = False
        await pilot.pause()
        assert "✗ List docs-folder" in screen_text(app)  # the step, with its status (no folder)
        assert "SUBAGENT-ANSWER" in screen_text(app)
