"""Snapshots of the main screens (pytest-textual-snapshot). Update with --snapshot-update.

Everything on screen is fixed: session ids, recording times (TZ=UTC), the workspace shown as
``~/project``, token counts (scripted usage) and the away clock.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import replace
from pathlib import Path

from cairn import __version__
from cairn.config.paths import chats_dir, project_root
from cairn.content import Content
from cairn.recording.recorder import ChatRecorder
from cairn.testing import reply, tool_call

from .conftest import away_for, send, settle, until
from .helpers import screen_text

SIZE = (100, 32)
USAGE = {"prompt_tokens": 5200, "completion_tokens": 40, "total_tokens": 5240}
RECAP = "Renaming the config loader. Next: update the imports in the CLI."


def ok(text: str = "ok"):
    return reply(text, usage=USAGE)


async def steady(pilot) -> None:
    """No blinking cursor in a snapshot."""
    pilot.app.prompt_input.cursor_blink = False
    await pilot.pause()


def test_welcome_screen(snap_compare, make_app):
    assert __version__  # the banner shows it: update the snapshots when it changes
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=steady)


def test_conversation_with_thought_tool_diff_and_answer(
    snap_compare, make_app, scripted_server, project
):
    (project / "config.py").write_text("def load():\n    return read_file()\n")
    edit = {"file_path": "config.py", "old_string": "read_file()", "new_string": "read_json()"}
    thinking = reply(reasoning="The loader should parse JSON.", usage=USAGE)
    scripted_server.enqueue(replace(thinking, tool_calls=tool_call("edit", edit).tool_calls),
                            purpose="main")
    scripted_server.enqueue(
        ok("Done: `load()` now uses **read_json**.\n\n- edited `config.py`\n- no tests changed"),
        purpose="main",
    )

    async def run(pilot) -> None:
        await steady(pilot)
        await send(pilot, "make load() parse JSON")
        await settle(pilot)

    assert snap_compare(
        make_app(approval_mode="yolo"), terminal_size=SIZE, run_before=run
    )


def test_shell_output_clipped_under_the_call(snap_compare, make_app, scripted_server):
    command = "for i in $(seq 1 12); do echo \"test_case_$i passed\"; done"
    scripted_server.enqueue(
        replace(tool_call("run_shell_command", {"command": command}), usage=USAGE),
        purpose="main",
    )
    scripted_server.enqueue(ok("All 12 tests pass."), purpose="main")

    async def run(pilot) -> None:
        await steady(pilot)
        await send(pilot, "run the tests")
        await settle(pilot)

    assert snap_compare(make_app(approval_mode="yolo"), terminal_size=SIZE, run_before=run)


def test_approval_dialog(snap_compare, make_app, scripted_server, project):
    (project / "config.py").write_text("def load():\n    return read_file()\n")
    edit = {"file_path": "config.py", "old_string": "read_file()", "new_string": "read_json()"}
    scripted_server.enqueue(replace(tool_call("edit", edit), usage=USAGE), purpose="main")

    async def run(pilot) -> None:
        await steady(pilot)
        await send(pilot, "make load() parse JSON")
        await until(pilot, lambda: "read_json()" in screen_text(pilot.app))

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run)


def test_question_dialog(snap_compare, make_app, scripted_server):
    question = {
        "questions": [
            {
                "question": "Which format should the config use?",
                "header": "Format",
                "options": [
                    {"label": "JSON", "description": "no new dependency"},
                    {"label": "TOML", "description": "comments allowed"},
                ],
            }
        ]
    }
    ask = replace(tool_call("ask_user_question", question), usage=USAGE)
    scripted_server.enqueue(ask, purpose="main")

    async def run(pilot) -> None:
        await steady(pilot)
        await send(pilot, "pick a config format with me")
        await until(pilot, lambda: "comments allowed" in screen_text(pilot.app))

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run)


def test_away_recap_in_the_conversation(snap_compare, make_app, scripted_server, clock):
    scripted_server.default = ok()
    scripted_server.enqueue(reply(f"<recap>{RECAP}</recap>"), purpose="recap")

    async def run(pilot) -> None:
        await steady(pilot)
        for prompt in ("rename loader.py to config.py", "fix the tests", "update the docs"):
            await send(pilot, prompt)
            await settle(pilot)
        await away_for(pilot, clock, 6)

    app = make_app({"general": {"showSessionRecap": True}})
    assert snap_compare(app, terminal_size=SIZE, run_before=run)


def _recorded(project: Path, session_id: str, prompt: str, recap: str | None, day: int) -> None:
    moment = _dt.datetime(2025, 3, day, 9, 30, tzinfo=_dt.UTC)
    recorder = ChatRecorder(
        chats_dir(project_root(project)) / f"{session_id}.jsonl",
        session_id=session_id,
        cwd=project,
        version="0.1.0",
        clock=lambda: moment,
    )
    recorder.record_user(Content.user(prompt))
    recorder.record_assistant(Content.model("Done."), model="scripted-model")
    if recap:
        item = {"type": "away_recap", "text": recap}
        recorder.record_slash_command(phase="result", raw_command="/recap", output_items=[item])
    recorder.close()


def test_resume_picker_shows_each_session_with_its_last_recap(snap_compare, make_app, project):
    _recorded(project, "aaaaaaaa-0000-4000-8000-000000000001", "rename the loader", RECAP, 1)
    _recorded(project, "bbbbbbbb-0000-4000-8000-000000000002", "write the usage docs", None, 2)

    async def run(pilot) -> None:
        await steady(pilot)
        await send(pilot, "/resume")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run)


def test_settings_dialog(snap_compare, make_app):
    async def run(pilot) -> None:
        await steady(pilot)
        await send(pilot, "/settings")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run)


def test_command_completion_menu(snap_compare, make_app):
    async def run(pilot) -> None:
        await steady(pilot)
        await pilot.press("/", "r", "e")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run)




DOCS_IMAGES = Path(__file__).parents[2] / "docs" / "images"
SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_snapshots"
# docs/usage.md shows these snapshots; after --snapshot-update, copy the changed ones over.
DOC_SCREENSHOTS = {
    "tui-welcome.svg": "test_welcome_screen.svg",
    "tui-conversation.svg": "test_conversation_with_thought_tool_diff_and_answer.svg",
    "tui-approval.svg": "test_approval_dialog.svg",
    "tui-shell-output.svg": "test_shell_output_clipped_under_the_call.svg",
    "tui-question.svg": "test_question_dialog.svg",
    "tui-away-recap.svg": "test_away_recap_in_the_conversation.svg",
    "tui-resume.svg": "test_resume_picker_shows_each_session_with_its_last_recap.svg",
    "tui-settings.svg": "test_settings_dialog.svg",
    "tui-completion.svg": "test_command_completion_menu.svg",
}


def test_docs_screenshots_are_the_current_snapshots():
    stale = [
        image
        for image, snapshot in DOC_SCREENSHOTS.items()
        if (DOCS_IMAGES / image).read_text() != (SNAPSHOTS / snapshot).read_text()
    ]

    assert stale == [], f"copy the snapshots over docs/images/{stale}"
