"""load_session and pending_question: history, active chain, checkpoints, damaged files."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.content import Content, FunctionCall, FunctionResponse, Text, Thought
from cairn.recording import SessionLoadError, load_session, pending_question

from .helpers import (
    model_message,
    new_session_id,
    open_recorder,
    record,
    user_message,
    write_lines,
)

CONVERSATION = [
    Content.user("read a.txt please"),
    Content(
        "model",
        [
            Thought("need the file"),
            Text("Reading it."),
            FunctionCall("c1", "read_file", {"p": "a"}),
        ],
    ),
    Content("user", [FunctionResponse("c1", "read_file", {"output": "hello"})]),
    Content.model("It says hello."),
]


def _record_conversation(recorder) -> None:
    user, model, results, answer = CONVERSATION
    recorder.record_user(user)
    recorder.record_assistant(model, model="m")
    recorder.record_tool_result(results)
    recorder.record_assistant(answer, model="m")


def test_history_round_trips_what_was_recorded(tmp_path):
    with open_recorder(tmp_path) as recorder:
        _record_conversation(recorder)

    loaded = load_session(recorder.path)

    assert loaded.history == CONVERSATION
    assert loaded.session_id == recorder.session_id
    assert loaded.last_uuid == recorder.last_uuid
    assert loaded.warnings == []


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path):
    with open_recorder(tmp_path) as recorder:
        _record_conversation(recorder)
    with recorder.path.open("a") as handle:
        handle.write('{"uuid": "x", "type": "assistant", "message": {"role": "mo')

    loaded = load_session(recorder.path)

    assert loaded.history == CONVERSATION
    assert loaded.last_uuid == recorder.last_uuid
    assert len(loaded.warnings) == 1
    assert "unfinished last record" in loaded.warnings[0]


def test_invalid_line_in_the_middle_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(
        path,
        [record("a", None, "user", message=user_message("hi"))],
        tail="not json at all\n"
        + json.dumps(record("b", "a", "assistant", message=model_message("hello")))
        + "\n",
    )

    loaded = load_session(path)

    assert [c.text for c in loaded.history] == ["hi", "hello"]
    assert loaded.warnings == ["line 2: not a valid record; skipped"]


def test_dead_branch_after_a_rewind_is_ignored(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("q1"))
    kept = recorder.record_assistant(Content.model("a1"), model="m")
    recorder.record_user(Content.user("abandoned question"))
    recorder.record_assistant(Content.model("abandoned answer"), model="m")
    recorder.last_uuid = kept  # rewind: later records continue from a1
    recorder.record_user(Content.user("q2"))
    recorder.record_assistant(Content.model("a2"), model="m")

    loaded = load_session(recorder.path)

    assert [c.text for c in loaded.history] == ["q1", "a1", "q2", "a2"]
    assert [item.text for item in loaded.items] == ["q1", "a1", "q2", "a2"]
    assert len(loaded.records) == 4


def test_history_starts_from_the_last_compression_checkpoint(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("old question"))
    recorder.record_assistant(Content.model("old answer"), model="m")
    recorder.record_system(
        "chat_compression",
        {"info": {"before": 900}, "compressedHistory": [user_message("summary v1")]},
    )
    recorder.record_user(Content.user("middle"))
    summary = [user_message("summary v2"), model_message("Got it.")]
    recorder.record_system("chat_compression", {"info": {}, "compressedHistory": summary})
    recorder.record_user(Content.user("new question"))
    recorder.record_assistant(Content.model("new answer"), model="m")

    loaded = load_session(recorder.path)

    assert [c.text for c in loaded.history] == [
        "summary v2",
        "Got it.",
        "new question",
        "new answer",
    ]


def test_mid_turn_message_joins_the_preceding_tool_results(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("go"))
    recorder.record_assistant(Content("model", [FunctionCall("c1", "glob", {})]), model="m")
    recorder.record_tool_result(Content("user", [FunctionResponse("c1", "glob", {"output": ""})]))
    recorder.record_system(
        "mid_turn_user_message", {"displayText": "skip tests"}, content=Content.user("skip tests")
    )

    loaded = load_session(recorder.path)

    assert loaded.history[-1] == Content(
        "user", [FunctionResponse("c1", "glob", {"output": ""}), Text("skip tests")]
    )
    assert len(loaded.history) == 3


def test_mid_turn_message_after_a_model_entry_is_its_own_user_entry(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("go"))
    recorder.record_assistant(Content.model("working"), model="m")
    recorder.record_system("mid_turn_user_message", {}, content=Content.user("faster"))

    loaded = load_session(recorder.path)

    assert loaded.history[-1] == Content.user("faster")


def test_slash_commands_and_other_system_records_are_not_model_history(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("hi"))
    recorder.record_slash_command(phase="invocation", raw_command="/recap")
    recorder.record_slash_command(
        phase="result", raw_command="/recap", output_items=[{"type": "away_recap", "text": "r"}]
    )
    recorder.record_system("ask_user_pending", {"question": "which?"})
    recorder.record_assistant(Content.model("hello"), model="m")

    loaded = load_session(recorder.path)

    assert loaded.history == [Content.user("hi"), Content.model("hello")]


def test_parent_cycle_is_cut_with_a_warning(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(
        path,
        [
            record("a", "b", "user", message=user_message("one")),
            record("b", "a", "assistant", message=model_message("two")),
        ],
    )

    loaded = load_session(path)

    assert [c.text for c in loaded.history] == ["one", "two"]
    assert any("cycle" in w for w in loaded.warnings)


def test_missing_parent_keeps_the_rest_of_the_chain_with_a_warning(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(path, [record("b", "gone", "assistant", message=model_message("two"))])

    loaded = load_session(path)

    assert [c.text for c in loaded.history] == ["two"]
    assert loaded.warnings == ["parent gone is missing; earlier history is not restored"]


def test_records_sharing_a_uuid_are_merged(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(
        path,
        [
            record("a", None, "user", message=user_message("hi")),
            record("b", "a", "assistant", model="first", message=model_message("Hel")),
            record("b", "a", "assistant", model="second", message=model_message("lo")),
        ],
    )

    loaded = load_session(path)

    assert loaded.history[-1] == Content("model", [Text("Hel"), Text("lo")])
    assert loaded.records[-1]["model"] == "first"


def test_missing_file_is_a_session_load_error(tmp_path):
    with pytest.raises(SessionLoadError, match="no session recording"):
        load_session(tmp_path / f"{new_session_id()}.jsonl")


def test_empty_file_is_an_empty_session(tmp_path):
    recorder = open_recorder(tmp_path)

    loaded = load_session(recorder.path)

    assert loaded.history == []
    assert loaded.last_uuid is None
    assert loaded.items == []


def test_resumed_recording_extends_the_loaded_history(tmp_path):
    with open_recorder(tmp_path) as recorder:
        _record_conversation(recorder)
    loaded = load_session(recorder.path)

    with open_recorder(tmp_path, loaded.session_id, parent_uuid=loaded.last_uuid) as resumed:
        resumed.record_user(Content.user("and b.txt?"))

    assert load_session(recorder.path).history == [*CONVERSATION, Content.user("and b.txt?")]


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=2000)
    | st.lists(st.text(max_size=80), max_size=8).map(lambda lines: "\n".join(lines).encode())
)
def test_any_file_content_loads_without_an_exception(tmp_path, data):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)

    loaded = load_session(path)

    assert isinstance(loaded.history, list)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    message=st.dictionaries(
        st.sampled_from(["role", "parts"]),
        st.none()
        | st.text()
        | st.lists(
            st.dictionaries(
                st.sampled_from(["text", "thought", "functionCall", "functionResponse"]),
                st.none() | st.text() | st.integers() | st.dictionaries(st.text(), st.text()),
            ),
            max_size=3,
        ),
    )
)
def test_any_message_shape_loads_without_an_exception(tmp_path, message):
    path = tmp_path / "fuzz.jsonl"
    write_lines(path, [record("a", None, "assistant", message=message)])

    loaded = load_session(path)

    assert len(loaded.history) <= 1


# --- pending_question ---------------------------------------------------------------------------

ASK = FunctionCall("q1", "ask_user_question", {"question": "Which db?", "options": ["a", "b"]})


def test_unanswered_question_is_pending(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("set up a db"))
    recorder.record_assistant(Content("model", [Text("Let me ask."), ASK]), model="m")

    assert pending_question(load_session(recorder.path)) == ASK


def test_answered_question_is_not_pending(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("set up a db"))
    recorder.record_assistant(Content("model", [ASK]), model="m")
    recorder.record_tool_result(
        Content("user", [FunctionResponse("q1", "ask_user_question", {"output": "a"})])
    )

    assert pending_question(load_session(recorder.path)) is None


def test_other_unanswered_tool_call_is_not_a_question(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("x"))
    recorder.record_assistant(Content("model", [FunctionCall("c", "glob", {})]), model="m")

    assert pending_question(load_session(recorder.path)) is None


def test_session_without_model_entries_has_no_pending_question(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("x"))

    assert pending_question(load_session(recorder.path)) is None


def test_mid_turn_message_recorded_as_payload_text_is_restored(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("go"))
    recorder.record_assistant(Content("model", [FunctionCall("c1", "glob", {})]), model="m")
    recorder.record_tool_result(Content("user", [FunctionResponse("c1", "glob", {"output": ""})]))
    recorder.record_system("mid_turn_user_message", {"text": "use src/ only"})

    loaded = load_session(recorder.path)

    assert loaded.history[-1].parts[-1] == Text("use src/ only")
    assert [(i.kind, i.text) for i in loaded.items][-1] == ("user_text", "use src/ only")
