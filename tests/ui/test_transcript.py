"""The transcript's widgets built from replayed items."""

from __future__ import annotations

from textual.app import App

from cairn.recording.replay import ReplayItem
from cairn.ui.transcript import (
    AssistantView,
    RecapView,
    SteerView,
    ThoughtView,
    ToolCallView,
    UserView,
    replay_widgets,
)


async def test_replayed_items_become_the_same_widgets_as_live_ones():
    items = [
        ReplayItem("user_text", "read it", uuid="u1"),
        ReplayItem("thought", "hmm", uuid="a1"),
        ReplayItem("tool_call", tool_call_id="c1", tool_name="read_file",
                   args={"file_path": "a"}, result="alpha", uuid="a1"),
        ReplayItem("user_text", "steer me", uuid="m1"),
        ReplayItem("assistant_text", "done", uuid="a2"),
        ReplayItem("recap", "Where we were.", uuid="s1"),
    ]

    async with App().run_test():
        widgets = replay_widgets(
            items, {"m1"}, title_of=lambda name, args: f"T {args['file_path']}"
        )

    assert [type(w) for w in widgets] == [
        UserView, ThoughtView, ToolCallView, SteerView, AssistantView, RecapView,
    ]
    tool = widgets[2]
    assert isinstance(tool, ToolCallView)
    assert (tool.tool_title, tool.status) == ("T a", "completed")


async def test_a_replayed_call_without_result_is_shown_as_interrupted():
    async with App().run_test():
        [tool] = replay_widgets([ReplayItem("tool_call", tool_call_id="c", tool_name="edit")])

    assert isinstance(tool, ToolCallView)
    assert tool.status == "cancelled"


async def test_a_failing_title_falls_back_to_the_tool_name():
    def broken(name, args):
        raise KeyError("file_path")

    async with App().run_test():
        [tool] = replay_widgets(
            [ReplayItem("tool_call", tool_call_id="c", tool_name="edit")], title_of=broken
        )

    assert isinstance(tool, ToolCallView)
    assert tool.tool_title == "edit"
