from cairn.agent.chat import ChatHistory
from cairn.content import Content, FunctionCall, FunctionResponse, Text, Thought


def test_copy_is_independent_of_the_live_history():
    history = ChatHistory([Content.user("hi")])
    copy = history.copy()
    copy[0].parts.append(Text("changed"))
    copy.append(Content.model("extra"))
    assert history.shallow()[0].parts == [Text("hi")]
    assert len(history) == 1


def test_shallow_returns_the_live_entries_in_a_new_list():
    history = ChatHistory([Content.user("hi")])
    shallow = history.shallow()
    shallow.append(Content.model("not added"))
    assert len(history) == 1
    assert history.shallow()[0] is shallow[0]


def test_dangling_calls_are_the_unanswered_calls_of_the_last_model_entry():
    history = ChatHistory(
        [
            Content.user("go"),
            Content("model", [FunctionCall("a", "glob", {}), FunctionCall("b", "glob", {})]),
            Content("user", [FunctionResponse("a", "glob", {"output": ""})]),
        ]
    )
    assert [c.id for c in history.dangling_calls()] == ["b"]


def test_strip_trailing_user_entries_removes_only_the_tail():
    history = ChatHistory([Content.user("1"), Content.model("2"), Content.user("3")])
    removed = history.strip_trailing_user_entries()
    assert [c.text for c in removed] == ["3"]
    assert len(history) == 2


def test_strip_thoughts_drops_entries_left_empty():
    history = ChatHistory([Content("model", [Thought("x")]), Content.model("y")])
    history.strip_thoughts()
    assert [c.text for c in history.shallow()] == ["y"]
