"""Rendering helpers of the transcript: diffs, recap lines, replayed items."""

from __future__ import annotations

from pathlib import Path

from textual.app import App

from cairn.recording.replay import ReplayItem
from cairn.tools.base import FileDiff
from cairn.ui.transcript import (
    MAX_DIFF_LINES,
    AssistantView,
    RecapView,
    SteerView,
    ThoughtView,
    ToolCallView,
    UserView,
    recap_text,
    render_diff,
    replay_widgets,
)


def test_diff_shows_removed_and_added_lines_relative_to_the_workspace():
    diff = FileDiff(Path("/ws/src/a.py"), "x = 1\ny = 2\n", "x = 1\ny = 3\n")

    text = render_diff(diff, Path("/ws"))

    assert text is not None
    assert text.plain.splitlines() == [
        "--- src/a.py",
        "+++ src/a.py",
        "@@ -1,2 +1,2 @@",
        " x = 1",
        "-y = 2",
        "+y = 3",
    ]


def test_a_new_file_is_all_added_lines():
    text = render_diff(FileDiff(Path("/ws/new.txt"), None, "hello\n"), Path("/ws"))

    assert text is not None
    assert text.plain.splitlines()[:2] == ["--- /dev/null", "+++ new.txt"]
    assert "+hello" in text.plain


def test_a_long_diff_is_cut_with_a_count():
    old = "".join(f"line {i}\n" for i in range(200))
    new = "".join(f"LINE {i}\n" for i in range(200))

    text = render_diff(FileDiff(Path("/ws/a"), old, new), Path("/ws"))

    assert text is not None
    lines = text.plain.splitlines()
    assert len(lines) == MAX_DIFF_LINES + 1
    assert lines[-1].endswith("more diff lines")


def test_recap_line_has_a_bold_label_and_italic_text():
    text = recap_text("Porting the parser.")

    assert text.plain == "※ recap: Porting the parser."
    styles = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert styles["recap: "] == "dim bold"
    assert styles["Porting the parser."] == "dim italic"


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
