"""ScriptedProvider: scripted replies played in process as provider stream events."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.content import Content, FunctionCall
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.side_query import side_query
from cairn.llm.types import (
    INVALID_ARGUMENTS_KEY,
    Finished,
    ModelRequest,
    Provider,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    Usage,
)
from cairn.testing import (
    Reply,
    ScriptedProvider,
    ToolCallSpec,
    error_reply,
    reply,
    tool_call,
    tool_calls,
)


def ask(text: str = "hello", **fields: Any) -> ModelRequest:
    return ModelRequest(model="scripted-model", contents=[Content.user(text)], **fields)


async def collect(provider: Provider, request: ModelRequest | None = None) -> list[StreamEvent]:
    return [event async for event in provider.stream(request or ask())]


def kinds(events: list[StreamEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


async def test_text_chunks_become_text_deltas_then_finished() -> None:
    provider = ScriptedProvider()
    provider.enqueue(reply(chunks=["Hel", "lo"]))

    events = await collect(provider)

    assert events[:2] == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(events[2], Finished)
    assert events[2].reason == "stop"
    assert events[2].usage.total_tokens > 0


async def test_reasoning_comes_first_as_a_thought() -> None:
    provider = ScriptedProvider()
    provider.enqueue(reply("answer", reasoning="hmm"))

    events = await collect(provider)

    assert events[:2] == [ThoughtDelta("hmm"), TextDelta("answer")]


async def test_tool_calls_follow_the_text_with_generated_ids() -> None:
    provider = ScriptedProvider()
    provider.enqueue(
        tool_calls(ToolCallSpec("glob", {"pattern": "*"}), ToolCallSpec("grep_search"), text="Go.")
    )

    events = await collect(provider)

    assert events[1:3] == [
        ToolCallDelta(FunctionCall("call_1", "glob", {"pattern": "*"})),
        ToolCallDelta(FunctionCall("call_2", "grep_search", {})),
    ]
    assert isinstance(events[3], Finished)
    assert events[3].reason == "tool_calls"


async def test_invalid_argument_json_becomes_the_marker() -> None:
    provider = ScriptedProvider()
    provider.enqueue(tool_call("edit", "{not json", id="c1"))

    events = await collect(provider)

    assert events[0] == ToolCallDelta(
        FunctionCall("c1", "edit", {INVALID_ARGUMENTS_KEY: "{not json"})
    )


async def test_scripted_usage_is_reported() -> None:
    provider = ScriptedProvider()
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    provider.enqueue(reply("ok", usage=usage))

    finished = (await collect(provider))[-1]

    assert isinstance(finished, Finished)
    assert finished.usage == Usage(10, 5, 15)


async def test_replies_are_taken_from_the_purpose_queue_first() -> None:
    provider = ScriptedProvider()
    provider.enqueue(reply("anyone"))
    provider.enqueue(reply("extract only"), purpose="extract")

    extract = await collect(provider, ask(purpose="extract"))
    main = await collect(provider, ask(purpose="main"))

    assert extract[0] == TextDelta("extract only")
    assert main[0] == TextDelta("anyone")


async def test_the_handler_comes_first_and_the_default_last() -> None:
    provider = ScriptedProvider(
        default=reply("default"),
        handler=lambda request: reply("handled") if request.purpose == "recap" else None,
    )
    provider.enqueue(reply("queued"))

    answers = [
        (await collect(provider, ask(purpose=purpose)))[0] for purpose in ("recap", "main", "main")
    ]

    assert answers == [TextDelta("handled"), TextDelta("queued"), TextDelta("default")]


async def test_an_exhausted_script_raises_a_provider_error_at_once() -> None:
    provider = ScriptedProvider()

    with pytest.raises(ProviderError, match="script exhausted") as failure:
        await collect(provider, ask(purpose="dream"))

    assert not failure.value.retryable
    assert len(provider.requests) == 1


async def test_each_attempt_is_recorded_as_a_snapshot() -> None:
    provider = ScriptedProvider(default=reply("ok"))
    history = [Content.user("first")]

    await collect(provider, ModelRequest(model="m", contents=history, purpose="main"))
    history.append(Content.model("later"))

    [recorded] = provider.requests_for("main")
    assert [c.text for c in recorded.contents] == ["first"]


async def test_a_retryable_error_is_retried_reporting_the_real_backoff() -> None:
    """The event carries the delay the real provider would wait; the scripted one does not."""
    provider = ScriptedProvider()
    provider.enqueue(error_reply(503, "busy"), reply("ok"))

    events = await collect(provider)

    assert kinds(events) == ["StreamRetry", "TextDelta", "Finished"]
    retry = events[0]
    assert isinstance(retry, StreamRetry)
    assert retry.attempt == 2
    assert 1.5 * 0.7 <= retry.delay <= 1.5 * 1.3  # the first backoff step, with jitter
    assert len(provider.requests) == 2


async def test_a_client_error_is_raised_with_its_status() -> None:
    provider = ScriptedProvider()
    provider.enqueue(error_reply(400, "bad request"), reply("never"))

    with pytest.raises(ProviderError, match="bad request") as failure:
        await collect(provider)

    assert failure.value.status == 400
    assert len(provider.requests) == 1


async def test_retry_after_is_carried_on_the_error() -> None:
    provider = ScriptedProvider()
    provider.enqueue(error_reply(429, retry_after=7))

    with pytest.raises(ProviderError) as failure:
        await collect(provider, ask(max_attempts=1))

    assert failure.value.retry_after == 7.0


async def test_a_dropped_stream_yields_its_partial_output_then_retries() -> None:
    provider = ScriptedProvider()
    provider.enqueue(reply(chunks=["part", "rest"], drop_after_chunks=1), reply("whole"))

    events = await collect(provider)

    assert kinds(events) == ["TextDelta", "StreamRetry", "TextDelta", "Finished"]


async def test_a_stream_dropped_three_times_fails() -> None:
    provider = ScriptedProvider(default=reply("x", drop_after_chunks=0))

    with pytest.raises(InvalidStreamError) as failure:
        await collect(provider)

    assert failure.value.kind == "dropped"
    assert len(provider.requests) == 3


async def test_a_missing_finish_reason_is_an_invalid_stream() -> None:
    provider = ScriptedProvider(default=reply("x", omit_finish=True))

    with pytest.raises(InvalidStreamError) as failure:
        await collect(provider, ask(max_attempts=1))

    assert failure.value.kind == "no_finish_reason"


async def test_an_empty_reply_is_an_invalid_stream() -> None:
    provider = ScriptedProvider(default=Reply())

    with pytest.raises(InvalidStreamError) as failure:
        await collect(provider, ask(max_attempts=1))

    assert failure.value.kind == "no_response"


async def test_raw_sse_payloads_are_read_by_the_real_stream_parser() -> None:
    payloads = [
        ": keep-alive",
        '{"choices":[{"index":0,"delta":{"content":"raw"}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        "[DONE]",
    ]
    provider = ScriptedProvider(default=Reply(raw_sse=payloads))

    events = await collect(provider)

    assert kinds(events) == ["TextDelta", "Finished"]
    assert events[0] == TextDelta("raw")


async def test_a_non_streaming_reply_is_read_as_a_completion_body() -> None:
    provider = ScriptedProvider(default=reply("whole answer", stream=False))

    events = await collect(provider)

    assert events[0] == TextDelta("whole answer")
    assert isinstance(events[-1], Finished)


async def test_side_query_runs_on_the_fast_model() -> None:
    provider = ScriptedProvider(default=reply(" fine "), fast_model="fast")

    result = await side_query(provider, purpose="recap", system="s", messages=[Content.user("?")])

    assert result.text == "fine"
    assert provider.requests[0].model == "fast"
    assert provider.requests[0].tools == ()


async def test_clear_forgets_requests_and_queued_replies() -> None:
    provider = ScriptedProvider()
    provider.enqueue(reply("a"), reply("b"))
    await collect(provider)

    provider.clear()

    assert provider.requests == []
    assert provider.pending_replies == 0


async def test_aclose_marks_the_provider_closed() -> None:
    provider = ScriptedProvider()

    await provider.aclose()

    assert provider.closed
