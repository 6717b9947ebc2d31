"""What a tool printed is shown under its call: a shell command's output clipped, searches and
reads as a summary, each expandable (click the line or press Ctrl+O)."""

from __future__ import annotations

from textual.widgets import Static

from cairn.testing import ToolCallSpec, reply, tool_call, tool_calls
from cairn.ui.transcript import ToolCallView, ToolOutput

from .conftest import record_session, send, settle
from .helpers import screen_text

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw
COUNT_TO_30 = "for i in $(seq 1 30); do echo line-$i; done"


def script_counting(server) -> None:
    """The model runs a command printing 30 lines, then answers."""
    server.enqueue(tool_call("run_shell_command", {"command": COUNT_TO_30}), purpose="main")
    server.enqueue(reply("Counted."), purpose="main")


def outputs(app) -> list[ToolOutput]:
    return list(app.query(ToolOutput))


async def test_a_shell_commands_output_is_shown_clipped(make_app, scripted_server):
    """Regression: the block said only `exit 0`; the output reached the model but not the user."""
    script_counting(scripted_server)
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "count")
        await settle(pilot)

        screen = screen_text(app)
        assert "line-1" in screen
        assert "line-5" in screen
        assert "line-6" not in screen
        assert "+25 lines · exit 0 (ctrl+o to expand)" in screen


async def test_the_output_shown_is_what_the_command_printed(make_app, scripted_server):
    """Regression: the expanded output ended with "Exit code: 0" (the line written for the
    model; the status is already on the "… +N lines · exit 0" line), counted in "+N lines"."""
    script_counting(scripted_server)
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=(100, 80)) as pilot:
        await send(pilot, "count")
        await settle(pilot)
        [output] = outputs(app)
        output.set_expanded(True)
        await pilot.pause()

        shown = output.shown_text()
        assert shown.splitlines()[-1] == "line-30"
        assert "Exit code" not in screen_text(app)


async def test_a_command_that_prints_nothing_shows_only_its_exit_status(
    make_app, scripted_server
):
    scripted_server.enqueue(tool_call("run_shell_command", {"command": "true"}), purpose="main")
    scripted_server.enqueue(reply("Done."), purpose="main")
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "run true")
        await settle(pilot)

        [output] = outputs(app)
        assert output.shown_text() == "exit 0"
        assert "Exit code" not in screen_text(app)


async def test_the_arguments_line_does_not_repeat_the_title(make_app, scripted_server, project):
    """Regression: under "✓ echo hi" the line `{"command": "echo hi"}` said it again."""
    (project / "notes.txt").write_text("a note\n")
    scripted_server.enqueue(
        tool_calls(
            ToolCallSpec("run_shell_command", {"command": "echo hi"}),
            ToolCallSpec("read_file", {"file_path": str(project / "notes.txt")}),
            ToolCallSpec("grep_search", {"pattern": "note", "glob": "*.txt"}),
        ),
        purpose="main",
    )
    scripted_server.enqueue(reply("Done."), purpose="main")
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "look around")
        await settle(pilot)

        screen = screen_text(app)
        assert '"command"' not in screen
        assert '"file_path"' not in screen
        assert '{"glob": "*.txt"}' in screen  # what the title does not say is still shown


async def test_ctrl_o_expands_and_collapses_every_clipped_output(make_app, scripted_server):
    script_counting(scripted_server)
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=(100, 80)) as pilot:
        await send(pilot, "count")
        await settle(pilot)

        await pilot.press("ctrl+o")
        await pilot.pause()
        assert "line-30" in screen_text(app)
        assert app.prompt_input.has_focus  # typing goes on where it was

        await pilot.press("ctrl+o")
        await pilot.pause()
        assert "line-30" not in screen_text(app)


async def test_clicking_the_more_line_expands_one_output(make_app, scripted_server):
    script_counting(scripted_server)
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=(100, 80)) as pilot:
        await send(pilot, "count")
        await settle(pilot)
        [output] = outputs(app)

        await pilot.click(output.expander.query_one("CollapsibleTitle"))
        await pilot.pause()

        assert "line-30" in screen_text(app)


async def test_a_short_output_is_shown_whole_without_an_expander(make_app, scripted_server):
    scripted_server.enqueue(tool_call("run_shell_command", {"command": "echo hi"}), purpose="main")
    scripted_server.enqueue(reply("Said hi."), purpose="main")
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "greet")
        await settle(pilot)

        [output] = outputs(app)
        assert output.expander is None
        assert "hi" in output.shown_text()


async def test_a_search_shows_its_summary_and_expands_to_the_matches(
    make_app, scripted_server, project
):
    for name in ("alpha.py", "beta.py", "gamma.py"):
        (project / name).write_text("")
    scripted_server.enqueue(tool_call("glob", {"pattern": "*.py"}), purpose="main")
    scripted_server.enqueue(reply("Three files."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "list python files")
        await settle(pilot)

        screen = screen_text(app)
        assert "Found 3 files (ctrl+o to expand)" in screen
        assert "beta.py" not in screen

        await pilot.press("ctrl+o")
        await pilot.pause()
        assert "beta.py" in screen_text(app)


async def test_a_failed_call_shows_its_error(make_app, scripted_server):
    scripted_server.enqueue(tool_call("read_file", {"file_path": "missing.txt"}), purpose="main")
    scripted_server.enqueue(reply("It is missing."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "read it")
        await settle(pilot)

        [tool] = app.query(ToolCallView)
        assert tool.status == "failed"
        assert "missing.txt" in screen_text(app)


async def test_a_resumed_shell_call_shows_its_output_as_the_live_one_did(
    make_app, make_runtime, scripted_server
):
    script_counting(scripted_server)
    old = "11111111-2222-4333-8444-555555555555"
    yolo = make_runtime({"tools": {"approvalMode": "yolo"}})
    await record_session(yolo, ["count"], session_id=old)

    app = make_app(resume=old)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()

        screen = screen_text(app)
        assert "line-5" in screen
        assert "+25 lines · exit 0 (ctrl+o to expand)" in screen


async def test_a_resumed_search_shows_the_summary_it_showed_live(
    make_app, make_runtime, scripted_server, project
):
    for name in ("alpha.py", "beta.py"):
        (project / name).write_text("")
    scripted_server.enqueue(tool_call("glob", {"pattern": "*.py"}), purpose="main")
    scripted_server.enqueue(reply("Two files."), purpose="main")
    old = "11111111-2222-4333-8444-555555555555"
    await record_session(make_runtime(), ["list"], session_id=old)

    app = make_app(resume=old)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()

        screen = screen_text(app)
        assert "Found 2 files (ctrl+o to expand)" in screen
        assert "beta.py" not in screen


async def test_a_calls_arguments_read_as_indented_json(make_app, scripted_server):
    """Issue #30: a pending call's arguments showed as raw JSON collapsed on one line."""
    todos = [{"id": "1", "content": "Write the parser", "status": "in_progress"}]
    scripted_server.enqueue(tool_call("todo_write", {"todos": todos}), purpose="main")
    scripted_server.enqueue(reply("Planned."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "plan it")
        await settle(pilot)

        [tool] = app.query(ToolCallView)
        shown = str(tool.query_one(".tool-args", Static).render())
        assert shown.splitlines()[:3] == ['{', '  "todos": [', "    {"]
        assert '      "content": "Write the parser",' in shown.splitlines()
