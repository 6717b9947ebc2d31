"""The Messages request body: roles, pairing of calls and results, thoughts, breakpoints."""

from __future__ import annotations

from cairn.content import Content, FunctionCall, FunctionResponse, Image, Text, Thought
from cairn.llm.anthropic.format import (
    CONTINUATION,
    AnthropicOptions,
    build_request_body,
    to_anthropic_messages,
)
from cairn.llm.types import ModelRequest

CALL = FunctionCall("toolu_1", "glob", {"pattern": "*.py"})
RESULT = FunctionResponse("toolu_1", "glob", {"output": "a.py"})


def test_consecutive_entries_of_one_role_are_merged_with_tool_results_first() -> None:
    messages = to_anthropic_messages(
        [
            Content.user("find python files"),
            Content("model", [CALL]),
            Content("user", [Text("(also: be quick)"), RESULT]),
            Content.user("thanks"),
        ]
    )

    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text", "text"]


def test_a_call_without_its_result_and_a_result_without_its_call_are_dropped() -> None:
    stray = FunctionResponse("toolu_9", "glob", {"output": "orphan"})
    messages = to_anthropic_messages(
        [
            Content.user("go"),
            Content("model", [Text("Looking."), CALL]),
            Content.user("never mind"),
            Content("user", [stray]),
        ]
    )

    assert messages[1]["content"] == [{"type": "text", "text": "Looking."}]
    assert all(b["type"] != "tool_result" for m in messages for b in m["content"])


def test_thoughts_go_back_only_with_their_signature() -> None:
    messages = to_anthropic_messages(
        [
            Content.user("q"),
            Content(
                "model",
                [
                    Thought("signed", "sig-1"),
                    Thought("", "opaque", redacted=True),
                    Thought("from another provider"),
                    Text("a"),
                ],
            ),
        ]
    )

    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "a"},
    ]


def test_a_history_starting_with_the_model_gets_a_user_message_first() -> None:
    messages = to_anthropic_messages([Content.model("hello"), Content.user("hi")])

    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": CONTINUATION}]}


def test_a_text_only_model_gets_notes_instead_of_images() -> None:
    image = Image("image/png", "iVBORw0KGgo=", "shot.png")

    [message] = to_anthropic_messages([Content("user", [image])], images=False)

    assert message["content"][0]["text"].startswith("[image shot.png (image/png, 8 B) not shown")


def test_at_most_four_breakpoints_on_a_long_conversation() -> None:
    history: list[Content] = []
    for n in range(6):
        history += [Content.user(f"q{n}"), Content.model(f"a{n}")]
    history.append(Content.user("last"))
    request = ModelRequest(model="m", contents=history, system="s")

    body = build_request_body(request, AnthropicOptions(cache=True))

    marks = [m for m in body["messages"] if "cache_control" in m["content"][-1]]
    assert len(marks) == 2 and body["system"][-1]["cache_control"] == {"type": "ephemeral"}


def test_thinking_is_off_for_side_queries_and_forced_tools() -> None:
    options = AnthropicOptions(thinking_budget=3000)
    main = ModelRequest(model="m", contents=[Content.user("q")])
    side = ModelRequest(model="m", contents=[Content.user("q")], allow_thinking=False)
    forced = ModelRequest(
        model="m", contents=[Content.user("q")], response_schema={"type": "object"}
    )

    assert build_request_body(main, options)["thinking"]["budget_tokens"] == 3000
    assert "thinking" not in build_request_body(side, options)
    assert "thinking" not in build_request_body(forced, options)


def test_a_small_thinking_budget_is_raised_to_the_api_minimum() -> None:
    request = ModelRequest(model="m", contents=[Content.user("q")], max_output_tokens=500)

    body = build_request_body(request, AnthropicOptions(thinking_budget=10))

    assert body["thinking"]["budget_tokens"] == 1024
    assert body["max_tokens"] == 1524
