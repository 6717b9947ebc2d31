"""The replay items a front end shows for a loaded session."""

from __future__ import annotations

from cairn.content import Content, FunctionCall, FunctionResponse, Text, Thought
from cairn.recording import ReplayItem, load_session

from .helpers import open_recorder, user_message


def _kinds_and_texts(items: list[ReplayItem]) -> list[tuple[str, str]]:
    return [(item.kind, item.text) for item in items]


def test_replay_lists_user_assistant_thought_and_tool_calls_in_order(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("list files"))
    recorder.record_assistant(
        Content(
            "model", [Thought("use glob"), Text("Sure."), FunctionCall("c1", "glob", {"p": "*"})]
        ),
        model="m",
    )
    recorder.record_tool_result(
        Content("user", [FunctionResponse("c1", "glob", {"output": "a.py"})])
    )
    recorder.record_assistant(Content.model("One file: a.py"), model="m")

    items = load_session(recorder.path).items

    assert _kinds_and_texts(items) == [
        ("user_text", "list files"),
        ("thought", "use glob"),
        ("assistant_text", "Sure."),
        ("tool_call", ""),
        ("assistant_text", "One file: a.py"),
    ]
    call = items[3]
    assert (call.tool_call_id, call.tool_name, call.args) == ("c1", "glob", {"p": "*"})
    assert call.result == "a.py"
    assert call.error is None


def test_failed_tool_call_carries_its_error(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_assistant(Content("model", [FunctionCall("c1", "edit", {})]), model="m")
    recorder.record_tool_result(
        Content("user", [FunctionResponse("c1", "edit", {"error": "0 matches"})])
    )

    (call,) = load_session(recorder.path).items

    assert call.error == "0 matches"
    assert call.result is None


def test_tool_call_without_a_result_has_none(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_assistant(Content("model", [FunctionCall("c1", "edit", {})]), model="m")

    (call,) = load_session(recorder.path).items

    assert call.result is None
    assert call.error is None


def test_adjacent_text_parts_of_one_answer_are_one_item(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_assistant(Content("model", [Text("Hel"), Text("lo")]), model="m")
    recorder.record_assistant(Content.model("Again"), model="m")

    items = load_session(recorder.path).items

    assert _kinds_and_texts(items) == [("assistant_text", "Hello"), ("assistant_text", "Again")]


def test_user_line_shows_what_was_typed_not_what_was_sent(tmp_path):
    recorder = open_recorder(tmp_path)
    sent = Content("user", [Text("<system-reminder>memory</system-reminder>"), Text("fix it")])
    recorder.record_user(sent, display_text="fix it", hook_context="ctx")

    items = load_session(recorder.path).items

    assert _kinds_and_texts(items) == [("user_text", "fix it")]


def test_slash_command_result_is_replayed_as_a_recap_not_a_user_line(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("hi"))
    recorder.record_slash_command(
        phase="result",
        raw_command="/recap",
        output_items=[
            {"type": "info", "text": "not a recap"},
            {"type": "away_recap", "text": "We were fixing the parser."},
        ],
    )

    items = load_session(recorder.path).items

    assert _kinds_and_texts(items) == [
        ("user_text", "hi"),
        ("recap", "We were fixing the parser."),
    ]


def test_recap_written_as_output_items_is_also_replayed(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_system(
        "slash_command",
        {
            "phase": "result",
            "rawCommand": "/recap",
            "outputItems": [{"type": "away_recap", "text": "r"}],
        },
    )

    assert _kinds_and_texts(load_session(recorder.path).items) == [("recap", "r")]


def test_mid_turn_message_is_replayed_as_a_user_line(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_system(
        "mid_turn_user_message", {"displayText": "also b.py"}, content=Content.user("also b.py")
    )

    assert _kinds_and_texts(load_session(recorder.path).items) == [("user_text", "also b.py")]


def test_runtime_messages_in_the_user_role_are_not_replayed_as_typed(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("do it"))
    recorder.record_user(Content.user("Tests still fail; continue."), provenance="stop_hook")

    assert _kinds_and_texts(load_session(recorder.path).items) == [("user_text", "do it")]


def test_replay_includes_the_part_compressed_away_from_the_model(tmp_path):
    recorder = open_recorder(tmp_path)
    recorder.record_user(Content.user("early"))
    recorder.record_system("chat_compression", {"compressedHistory": [user_message("sum")]})
    recorder.record_user(Content.user("late"))

    loaded = load_session(recorder.path)

    assert [c.text for c in loaded.history] == ["sum", "late"]
    assert _kinds_and_texts(loaded.items) == [("user_text", "early"), ("user_text", "late")]
