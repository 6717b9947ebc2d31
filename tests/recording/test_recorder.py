"""ChatRecorder: the lines it writes, the chain it keeps, and failures it survives."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from cairn.content import Content, FunctionCall, FunctionResponse, Text
from cairn.debug_log import bind_session
from cairn.recording import ChatRecorder, load_session

from .helpers import VERSION, new_session_id, open_recorder, read_lines


def test_opening_creates_the_file_and_its_folders(tmp_path):
    chats = tmp_path / "projects" / "key" / "chats"

    recorder = open_recorder(chats)

    assert recorder.path.exists()
    assert recorder.path.read_bytes() == b""
    assert stat.S_IMODE(recorder.path.stat().st_mode) == 0o600


def test_records_are_chained_by_parent_uuid(tmp_path):
    recorder = open_recorder(tmp_path)

    first = recorder.record_user(Content.user("hi"))
    second = recorder.record_assistant(Content.model("hello"), model="m")
    third = recorder.record_user(Content.user("bye"))

    lines = read_lines(recorder.path)
    assert [line["uuid"] for line in lines] == [first, second, third]
    assert [line["parentUuid"] for line in lines] == [None, first, second]
    assert recorder.last_uuid == third


def test_every_record_carries_session_cwd_version_and_utc_time(tmp_path):
    session_id = new_session_id()
    recorder = open_recorder(tmp_path, session_id)

    recorder.record_user(Content.user("hi"))
    recorder.record_user(Content.user("again"))

    first, second = read_lines(recorder.path)
    assert first["sessionId"] == session_id
    assert first["cwd"] == "/work/project"
    assert first["version"] == VERSION
    assert first["type"] == "user"
    assert first["timestamp"] == "2025-03-01T09:30:00.000Z"
    assert second["timestamp"] == "2025-03-01T09:30:01.000Z"
    assert "subtype" not in first


def test_user_record_keeps_display_text_and_hook_context(tmp_path):
    recorder = open_recorder(tmp_path)
    sent = Content("user", [Text("fix it"), Text("<hook>branch main</hook>")])

    recorder.record_user(sent, display_text="fix it", hook_context="branch main")

    (line,) = read_lines(recorder.path)
    assert line["message"] == sent.to_dict()
    assert line["systemPayload"] == {"displayText": "fix it", "hookContext": "branch main"}


def test_assistant_record_keeps_model_and_usage(tmp_path):
    recorder = open_recorder(tmp_path)
    answer = Content("model", [Text("ok"), FunctionCall("c1", "read_file", {"path": "a"})])

    recorder.record_assistant(answer, model="qwen3-coder", usage={"prompt_tokens": 12})

    (line,) = read_lines(recorder.path)
    assert line["type"] == "assistant"
    assert line["message"] == answer.to_dict()
    assert line["model"] == "qwen3-coder"
    assert line["usageMetadata"] == {"prompt_tokens": 12}


def test_tool_result_record_keeps_responses_and_ui_details(tmp_path):
    recorder = open_recorder(tmp_path)
    results = Content("user", [FunctionResponse("c1", "read_file", {"output": "text"})])

    recorder.record_tool_result(results, tool_results=[{"callId": "c1", "status": "success"}])

    (line,) = read_lines(recorder.path)
    assert line["type"] == "tool_result"
    assert line["message"] == results.to_dict()
    assert line["toolCallResult"] == [{"callId": "c1", "status": "success"}]


def test_slash_command_records_are_system_records(tmp_path):
    recorder = open_recorder(tmp_path)

    recorder.record_slash_command(phase="invocation", raw_command="/recap")
    recorder.record_slash_command(
        phase="result",
        raw_command="/recap",
        output_items=[{"type": "away_recap", "text": "We were fixing the parser."}],
    )

    invocation, result = read_lines(recorder.path)
    assert invocation["type"] == "system"
    assert invocation["subtype"] == "slash_command"
    assert invocation["systemPayload"] == {"phase": "invocation", "rawCommand": "/recap"}
    assert result["systemPayload"]["outputHistoryItems"] == [
        {"type": "away_recap", "text": "We were fixing the parser."}
    ]


def test_system_record_keeps_subtype_payload_and_content(tmp_path):
    recorder = open_recorder(tmp_path)

    recorder.record_system(
        "mid_turn_user_message", {"displayText": "also check b.py"}, content=Content.user("b.py")
    )

    (line,) = read_lines(recorder.path)
    assert line["subtype"] == "mid_turn_user_message"
    assert line["systemPayload"] == {"displayText": "also check b.py"}
    assert line["message"] == {"role": "user", "parts": [{"text": "b.py"}]}


def test_payload_values_json_cannot_encode_are_written_as_text(tmp_path):
    recorder = open_recorder(tmp_path)

    recorder.record_system("note", {"file": Path("/a/b.txt")})

    (line,) = read_lines(recorder.path)
    assert line["systemPayload"] == {"file": "/a/b.txt"}


def test_resuming_continues_the_chain_in_the_same_file(tmp_path):
    session_id = new_session_id()
    with open_recorder(tmp_path, session_id) as recorder:
        recorder.record_user(Content.user("one"))
        tip = recorder.record_assistant(Content.model("two"), model="m")

    with open_recorder(tmp_path, session_id, parent_uuid=tip) as resumed:
        resumed.record_user(Content.user("three"))

    lines = read_lines(tmp_path / f"{session_id}.jsonl")
    assert len(lines) == 3
    assert lines[2]["parentUuid"] == tip


def test_reopening_after_a_torn_last_line_starts_a_new_line(tmp_path):
    """Regression: a record appended after a crash-torn line was glued onto it and lost too."""
    session_id = new_session_id()
    with open_recorder(tmp_path, session_id) as recorder:
        tip = recorder.record_user(Content.user("before the crash"))
    path = tmp_path / f"{session_id}.jsonl"
    with path.open("a") as handle:
        handle.write('{"uuid": "torn", "parentUuid": "')

    with open_recorder(tmp_path, session_id, parent_uuid=tip) as resumed:
        resumed.record_user(Content.user("after the crash"))

    loaded = load_session(path)
    assert [c.text for c in loaded.history] == ["before the crash", "after the crash"]
    assert len(loaded.warnings) == 1


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_failed_write_is_logged_and_does_not_raise(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAIRN_DEBUG_LOG_FILE", raising=False)
    recorder = ChatRecorder(Path("/dev/full"), session_id="s", cwd=tmp_path, version="v")

    with bind_session("recorder-write-failure-test"):
        returned = recorder.record_user(Content.user("hi"))

    assert returned
    assert recorder.last_uuid is None  # the lost record does not become the next one's parent
    log = (tmp_path / "home" / "debug" / "recorder-write-failure-test.txt").read_text()
    assert "[CHAT_RECORDING]" in log
    assert "record dropped" in log


def test_unopenable_path_records_nothing_and_does_not_raise(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")

    recorder = ChatRecorder(blocker / "s.jsonl", session_id="s", cwd=tmp_path, version="v")
    recorder.record_user(Content.user("hi"))

    assert recorder.last_uuid is None


def test_records_after_close_are_dropped_without_raising(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("kept"))

    recorder.close()
    recorder.close()
    recorder.record_user(Content.user("dropped"))

    assert [line["message"]["parts"][0]["text"] for line in read_lines(recorder.path)] == ["kept"]


def test_concurrent_writers_never_interleave_lines(tmp_path):
    session_id = new_session_id()
    recorders = [open_recorder(tmp_path, session_id) for _ in range(4)]
    big = "x" * 100_000

    def write_many(recorder: ChatRecorder, marker: str) -> None:
        for _ in range(25):
            recorder.record_user(Content.user(marker + big))

    threads = [
        threading.Thread(target=write_many, args=(r, str(i))) for i, r in enumerate(recorders)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    lines = read_lines(tmp_path / f"{session_id}.jsonl")
    assert len(lines) == 100
    assert all(line["message"]["parts"][0]["text"][1:] == big for line in lines)
