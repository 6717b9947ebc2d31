"""The Anthropic Messages provider against the scripted server speaking the Messages wire."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cairn.content import Content, FunctionCall, FunctionResponse, Image, Text, Thought
from cairn.llm.anthropic import AnthropicProvider
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.retry import RetryPolicy
from cairn.llm.side_query import side_query
from cairn.llm.structured import RESPOND_TOOL
from cairn.llm.types import (
    Finished,
    ModelRequest,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    ToolDeclaration,
)
from cairn.testing import Reply, ScriptedServer, error_reply, reply, tool_call
from cairn.testing.cache import PromptCache

from ..helpers import RecordingSleep

NO_JITTER = RetryPolicy(jitter=0.0)
TOOL = ToolDeclaration("read_file", "Read a file", {"type": "object", "properties": {}})


def make(server: ScriptedServer, sleep: RecordingSleep, **options: Any) -> AnthropicProvider:
    return AnthropicProvider(
        base_url=server.base_url,
        api_key="ant-key",
        model="claude-test",
        retry=NO_JITTER,
        sleep=sleep,
        **options,
    )


@pytest.fixture
async def provider(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> AsyncIterator[AnthropicProvider]:
    instance = make(scripted_server, sleep)
    yield instance
    await instance.aclose()


def ask(*contents: Content, **fields: Any) -> ModelRequest:
    return ModelRequest(
        model="claude-test", contents=list(contents) or [Content.user("hello")], **fields
    )


async def collect(provider: AnthropicProvider, request: ModelRequest | None = None) -> list[Any]:
    return [event async for event in provider.stream(request or ask())]


def texts(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_text_streams_then_finishes_with_usage(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    scripted_server.enqueue(reply(chunks=["Hel", "lo"]))

    events = await collect(provider)

    assert texts(events) == "Hello"
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.reason == "stop"
    assert finished.usage.input_tokens > 0 and finished.usage.output_tokens > 0
    [request] = scripted_server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "ant-key"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body["max_tokens"] == 8192
    assert request.body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}],
        }
    ]


async def test_a_tool_call_is_assembled_and_sent_back_with_its_result(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    scripted_server.enqueue(
        Reply(
            text="Let me look.", tool_calls=tool_call("read_file", {"file_path": "a.py"}).tool_calls
        ),
        reply("It is empty."),
    )

    first = await collect(provider, ask(tools=[TOOL]))
    [call] = [e.call for e in first if isinstance(e, ToolCallDelta)]
    history = [
        Content.user("what is in a.py?"),
        Content("model", [Text("Let me look."), call]),
        Content("user", [FunctionResponse(call.id, call.name, {"output": ""})]),
    ]
    second = await collect(provider, ask(*history, tools=[TOOL]))

    assert call.name == "read_file" and call.args == {"file_path": "a.py"}
    assert first[-1].reason == "tool_calls"
    assert texts(second) == "It is empty."
    sent = scripted_server.requests[1].body
    assert sent["tools"][0]["name"] == "read_file" and "input_schema" in sent["tools"][0]
    assistant, result = sent["messages"][1:]
    assert assistant["content"][1] == {
        "type": "tool_use", "id": call.id, "name": "read_file", "input": {"file_path": "a.py"}
    }  # fmt: skip
    assert result["content"][0]["type"] == "tool_result"
    assert result["content"][0]["tool_use_id"] == call.id


async def test_a_529_is_retried_after_its_retry_after(
    scripted_server: ScriptedServer, provider: AnthropicProvider, sleep: RecordingSleep
) -> None:
    scripted_server.enqueue(error_reply(529, "Overloaded", retry_after=3), reply("Back."))

    events = await collect(provider)

    [retry] = [e for e in events if isinstance(e, StreamRetry)]
    assert retry.describe() == "retrying in 3 s (attempt 2 of 7): HTTP 529: Overloaded"
    assert sleep.delays == [3.0]
    assert texts(events) == "Back."
    assert scripted_server.requests[0].body == scripted_server.requests[1].body


async def test_an_overloaded_error_event_inside_the_stream_is_retried(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = f"event: error\ndata: {json.dumps(payload)}"
    scripted_server.enqueue(Reply(raw_sse=[error]), reply("ok"))

    events = await collect(provider)

    assert "Overloaded" in next(e for e in events if isinstance(e, StreamRetry)).reason
    assert texts(events) == "ok"


async def test_a_400_names_the_api_message_and_is_not_retried(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    scripted_server.enqueue(error_reply(400, "prompt is too long"))

    with pytest.raises(ProviderError, match="HTTP 400: prompt is too long"):
        await collect(provider)

    assert len(scripted_server.requests) == 1


async def test_thinking_streams_as_thoughts_and_its_signature_goes_back(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> None:
    provider = make(scripted_server, sleep, thinking_budget=2048)
    scripted_server.enqueue(
        Reply(reasoning="Read it first.", tool_calls=tool_call("read_file", {}).tool_calls),
        reply("Done."),
    )

    first = await collect(provider, ask(tools=[TOOL], temperature=0.5))
    thought = "".join(e.text for e in first if isinstance(e, ThoughtDelta))
    [signed] = [e for e in first if isinstance(e, ThoughtDelta) and e.signature]
    [call] = [e.call for e in first if isinstance(e, ToolCallDelta)]
    history = [
        Content.user("go"),
        Content("model", [Thought(thought, signed.signature), call]),
        Content("user", [FunctionResponse(call.id, call.name, {"output": "x"})]),
    ]
    second = await collect(provider, ask(*history, tools=[TOOL]))
    await provider.aclose()

    assert thought == "Read it first."
    assert texts(second) == "Done."
    body = scripted_server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 8192 + 2048
    assert "temperature" not in body  # the API refuses sampling settings with thinking
    sent_back = scripted_server.requests[1].body["messages"][1]["content"][0]
    assert sent_back == {
        "type": "thinking", "thinking": "Read it first.", "signature": signed.signature
    }  # fmt: skip


async def test_a_forged_thinking_signature_is_refused_as_the_api_would(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    history = [
        Content.user("go"),
        Content("model", [Thought("made up", "sig-forged"), Text("hi")]),
        Content.user("again"),
    ]

    with pytest.raises(ProviderError, match="Invalid `signature`"):
        await collect(provider, ask(*history))


async def test_a_json_side_query_is_a_forced_schema_tool_without_thinking(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> None:
    provider = make(scripted_server, sleep, thinking_budget=4096, fast_model="claude-fast")
    scripted_server.enqueue(tool_call(RESPOND_TOOL, {"answer": "yes"}))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}

    result = await side_query(
        provider, purpose="t", system="Decide.", messages=[Content.user("?")], json_schema=schema
    )
    await provider.aclose()

    assert result.data == {"answer": "yes"}
    body = scripted_server.requests[0].body
    assert body["model"] == "claude-fast"
    assert body["tool_choice"] == {"type": "tool", "name": RESPOND_TOOL}
    assert "thinking" not in body
    assert body["system"][0]["text"].startswith("Decide.")


async def test_images_are_image_blocks_and_a_tools_images_go_inside_its_result(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    scripted_server.enqueue(reply("A cat."))
    image = Image("image/png", "iVBORw0KGgo=", "cat.png")
    call = FunctionCall("toolu_1", "read_file", {"file_path": "cat.png"})
    history = [
        Content("user", [Text("and this?"), image]),
        Content("model", [call]),
        Content("user", [FunctionResponse("toolu_1", "read_file", {"output": "image"}, (image,))]),
    ]

    await collect(provider, ask(*history))

    [request] = scripted_server.requests
    assert request.images == ["data:image/png;base64,iVBORw0KGgo="] * 2
    result = request.body["messages"][2]["content"][0]
    assert [b["type"] for b in result["content"]] == ["text", "image"]


async def test_cache_breakpoints_are_sent_and_hits_are_counted(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    scripted_server.prompt_cache = PromptCache("marked")
    scripted_server.default = reply("ok")
    system = "You are a careful agent. " * 40
    first = ask(Content.user("one"), system=system, tools=[TOOL])
    history = [Content.user("one"), Content.model("ok"), Content.user("two")]

    await collect(provider, first)
    events = await collect(provider, ask(*history, system=system, tools=[TOOL]))

    body = scripted_server.requests[1].body
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [
        m["content"][-1].get("cache_control") for m in body["messages"] if m["role"] == "user"
    ]
    assert marked == [{"type": "ephemeral"}] * 2
    usage = events[-1].usage
    assert 0 < usage.cached_tokens < usage.input_tokens
    assert usage.cache_write_tokens > 0


async def test_prompt_caching_off_sends_no_breakpoints(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> None:
    provider = make(scripted_server, sleep, prompt_caching="off")
    scripted_server.enqueue(reply("ok"))

    await collect(provider, ask(system="s", tools=[TOOL]))
    await provider.aclose()

    assert "cache_control" not in json.dumps(scripted_server.requests[0].body)


async def test_a_bearer_token_is_sent_as_authorization(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> None:
    provider = make(scripted_server, sleep, bearer=True)
    scripted_server.enqueue(reply("ok"))

    await collect(provider)
    await provider.aclose()

    headers = scripted_server.requests[0].headers
    assert headers["authorization"] == "Bearer ant-key" and "x-api-key" not in headers


async def test_a_non_streamed_message_body_is_understood(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    scripted_server.enqueue(Reply(reasoning="hmm", text="Plain.", stream=False))

    events = await collect(provider)

    assert texts(events) == "Plain."
    assert [e.signature != "" for e in events if isinstance(e, ThoughtDelta)] == [False, True]


async def test_a_stream_without_a_stop_reason_is_retried_then_fails(
    scripted_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    scripted_server.default = reply("cut", omit_finish=True)

    with pytest.raises(InvalidStreamError) as failure:
        await collect(provider)

    assert failure.value.kind == "no_finish_reason"
    assert len(scripted_server.requests) == 3
