"""list_sessions and latest_session over real recordings in tmp_path."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from cairn.content import Content
from cairn.debug_log import bind_session
from cairn.recording import latest_session, list_sessions

from .helpers import START, new_session_id, open_recorder


def _session(chats: Path, prompt: str, *, age_minutes: float = 0, **kwargs) -> str:
    """A recorded session whose file was last changed ``age_minutes`` ago."""
    with open_recorder(chats, **kwargs) as recorder:
        recorder.record_user(Content.user(prompt))
        recorder.record_assistant(Content.model(f"answer to {prompt}"), model="m")
    moment = _dt.datetime.now().timestamp() - age_minutes * 60
    os.utime(recorder.path, (moment, moment))
    return recorder.session_id


def test_sessions_are_listed_newest_first(tmp_path):
    old = _session(tmp_path, "old", age_minutes=30)
    new = _session(tmp_path, "new", age_minutes=1)
    middle = _session(tmp_path, "middle", age_minutes=10)

    sessions = list_sessions(tmp_path)

    assert [s.session_id for s in sessions] == [new, middle, old]
    assert [s.first_prompt for s in sessions] == ["new", "middle", "old"]


def test_limit_keeps_the_newest(tmp_path):
    for minutes in range(5):
        _session(tmp_path, f"p{minutes}", age_minutes=minutes)

    sessions = list_sessions(tmp_path, limit=2)

    assert [s.first_prompt for s in sessions] == ["p0", "p1"]


def test_session_info_fields(tmp_path):
    session_id = _session(tmp_path, "hello there")

    (info,) = list_sessions(tmp_path)

    assert info.session_id == session_id
    assert info.path == tmp_path / f"{session_id}.jsonl"
    assert info.start_time == START
    assert info.mtime.tzinfo is not None
    assert info.message_count == 2
    assert info.last_recap is None


def test_first_prompt_is_what_was_typed_on_one_line_and_at_most_200_chars(tmp_path):
    with open_recorder(tmp_path) as recorder:
        recorder.record_slash_command(phase="invocation", raw_command="/memory")
        recorder.record_user(Content.user("expanded"), display_text="word\n\n" * 150)

    (info,) = list_sessions(tmp_path)

    assert len(info.first_prompt) == 200
    assert info.first_prompt.startswith("word word word")
    assert info.first_prompt.endswith("...")


def test_last_recap_is_the_newest_recap(tmp_path):
    with open_recorder(tmp_path) as recorder:
        recorder.record_user(Content.user("hi"))
        for text in ("first recap", "second recap"):
            recorder.record_slash_command(
                phase="result",
                raw_command="/recap",
                output_items=[{"type": "away_recap", "text": text}],
            )
        recorder.record_user(Content.user("later"))

    (info,) = list_sessions(tmp_path)

    assert info.last_recap == "second recap"
    assert info.message_count == 2


def test_message_count_ignores_system_and_tool_records(tmp_path):
    with open_recorder(tmp_path) as recorder:
        recorder.record_user(Content.user("hi"))
        recorder.record_system("chat_compression", {"compressedHistory": []})
        recorder.record_tool_result(Content.user("r"))
        recorder.record_assistant(Content.model("a"), model="m")

    (info,) = list_sessions(tmp_path)

    assert info.message_count == 2


def test_corrupt_file_is_skipped_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAIRN_DEBUG_LOG_FILE", raising=False)
    chats = tmp_path / "chats"
    good = _session(chats, "fine")
    corrupt = new_session_id()
    (chats / f"{corrupt}.jsonl").write_text("this is not json\n")

    with bind_session("listing-corrupt-test"):
        sessions = list_sessions(chats)

    assert [s.session_id for s in sessions] == [good]
    log = (tmp_path / "home" / "debug" / "listing-corrupt-test.txt").read_text()
    assert corrupt in log


def test_crash_truncated_session_is_still_listed(tmp_path):
    session_id = _session(tmp_path, "survived")
    with (tmp_path / f"{session_id}.jsonl").open("a") as handle:
        handle.write('{"uuid": "torn", "ty')

    (info,) = list_sessions(tmp_path)

    assert info.first_prompt == "survived"


def test_other_files_and_empty_sessions_are_not_listed(tmp_path):
    listed = _session(tmp_path, "real")
    (tmp_path / "notes.jsonl").write_text('{"uuid": "a"}\n')
    (tmp_path / f"{new_session_id()}.jsonl.bak").write_text('{"uuid": "a"}\n')
    (tmp_path / f"{new_session_id()}.jsonl").write_text("")
    (tmp_path / "archive").mkdir()

    assert [s.session_id for s in list_sessions(tmp_path)] == [listed]


def test_missing_chats_folder_lists_nothing(tmp_path):
    assert list_sessions(tmp_path / "nope") == []
    assert latest_session(tmp_path / "nope") is None


def test_latest_session_is_the_newest(tmp_path):
    _session(tmp_path, "older", age_minutes=5)
    newest = _session(tmp_path, "newer", age_minutes=1)

    latest = latest_session(tmp_path)

    assert latest is not None
    assert latest.session_id == newest
