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


async def test_a_summary_cut_at_its_output_bound_says_so():
    """Issue 33: an answer cut at its bound must be said to be cut, side queries' too."""
    from cairn.agent.compression import CompressionStatus, compress_history
    from cairn.testing import Reply, ScriptedProvider

    provider = ScriptedProvider(
        Reply(text="<state_snapshot>the goal is", finish_reason="length",
              usage={"prompt_tokens": 4000, "completion_tokens": 20})
    )  # fmt: skip

    result = await compress_history(
        _conversation(12), provider=provider, model="m", original_tokens=6000
    )

    assert result.status is CompressionStatus.COMPRESSED
    assert result.cut
    assert result.describe().endswith(
        "(the summary was cut at its output bound: model.generationConfig.maxOutputTokens"
        ".compress)."
    )
