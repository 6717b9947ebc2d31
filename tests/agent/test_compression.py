from cairn.agent.compression import find_split_point
from cairn.content import Content, FunctionCall, FunctionResponse


def _conversation(rounds: int) -> list[Content]:
    history: list[Content] = []
    for i in range(rounds):
        history.append(Content.user(f"question {i} " + "x" * 200))
        history.append(Content.model(f"answer {i} " + "y" * 200))
    return history


def test_split_lands_on_a_plain_user_message_after_seventy_percent():
    history = _conversation(10)
    split = find_split_point(history, 0.7)
    assert history[split].role == "user"
    assert 12 <= split <= 16


def test_split_never_lands_on_a_tool_result():
    history = [
        *_conversation(3),
        Content("model", [FunctionCall("c", "glob", {})]),
        Content("user", [FunctionResponse("c", "glob", {"output": "z" * 5000})]),
        Content.model("done"),
    ]
    split = find_split_point(history, 0.7)
    kept = history[split:]
    assert not kept or not any(isinstance(p, FunctionResponse) for p in kept[0].parts)


def test_a_conversation_at_rest_may_be_compressed_whole():
    history = [Content.user("a" * 10), Content.model("b" * 5000)]
    assert find_split_point(history, 0.7) == len(history)
