"""Reading chat-completions chunks: shapes, and any chunk in, events or a provider error out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.content import Content
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.openai.stream import ChunkParser, parse_completion
from cairn.llm.types import (
    Finished,
    ModelRequest,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    Usage,
)
from cairn.testing import Reply, ScriptedProvider

# The keys the parser reads, so generated chunks reach every branch and not only the top level.
_KEYS = st.sampled_from(
    [
        "choices", "delta", "message", "content", "reasoning_content", "reasoning", "tool_calls",
        "index", "id", "type", "function", "name", "arguments", "finish_reason", "usage",
        "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
        "cached_tokens", "completion_tokens_details", "reasoning_tokens", "error", "text",
    ]
)  # fmt: skip
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["stop", "tool_calls", "length", "[DONE]"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=25,
)

_COUNT = st.integers(min_value=0, max_value=10_000)
_DELTA = st.one_of(
    st.builds(lambda t: {"content": t}, st.text(min_size=1, max_size=9)),
    st.builds(lambda t: {"reasoning_content": t}, st.text(min_size=1, max_size=9)),
    st.builds(
        lambda i, name, args: {
            "tool_calls": [{"index": i, "function": {"name": name, "arguments": args}}]
        },
        st.integers(min_value=0, max_value=2),
        st.sampled_from(["read_file", "edit"]),
        st.text(max_size=9),
    ),
)


@st.composite
def _valid_stream(draw: st.DrawFn) -> list[str]:
    """The payloads of a well-formed stream: deltas, a finish chunk, maybe usage, [DONE]."""
    deltas = draw(st.lists(_DELTA, min_size=1, max_size=5))
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": d}]} for d in deltas]
    reason = draw(st.sampled_from(["stop", "tool_calls", "length", "content_filter"]))
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    if draw(st.booleans()):
        usage = {"prompt_tokens": draw(_COUNT), "completion_tokens": draw(_COUNT)}
        chunks.append({"choices": [], "usage": usage})
    return [*(json.dumps(c) for c in chunks), "[DONE]"]


@st.composite
def _damaged_stream(draw: st.DrawFn) -> list[str]:
    """A well-formed stream with one payload replaced, one field swapped, or text inserted."""
    payloads = draw(_valid_stream())
    at = draw(st.integers(min_value=0, max_value=len(payloads) - 1))
    how = draw(st.sampled_from(["replace", "swap", "insert"]))
    if how == "replace":
        payloads[at] = draw(_VALUES.map(json.dumps) | st.text(max_size=30))
    elif how == "insert":
        payloads.insert(at, draw(_VALUES.map(json.dumps) | st.text(max_size=30)))
    elif payloads[at] != "[DONE]":
        payloads[at] = json.dumps(_swap(json.loads(payloads[at]), draw))
    return payloads


def _swap(value: Any, draw: st.DrawFn) -> Any:
    """``value`` with one nested field (chosen by ``draw``) replaced by any JSON value."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        value[key] = draw(_VALUES) if draw(st.booleans()) else _swap(value[key], draw)
    elif isinstance(value, list) and value:
        i = draw(st.integers(min_value=0, max_value=len(value) - 1))
        value[i] = draw(_VALUES) if draw(st.booleans()) else _swap(value[i], draw)
    return value


_PAYLOADS = _damaged_stream() | st.lists(_VALUES.map(json.dumps) | st.text(max_size=30), max_size=4)


def _well_typed(event: StreamEvent) -> bool:
    match event:
        case TextDelta(text) | ThoughtDelta(text):
            return isinstance(text, str) and bool(text)
        case ToolCallDelta(call):
            return isinstance(call.name, str) and isinstance(call.args, dict)
        case Finished(reason, usage):
            counts = (usage.input_tokens, usage.output_tokens, usage.cached_tokens)
            return isinstance(reason, str) and all(isinstance(n, int) and n >= 0 for n in counts)
    return False


@settings(max_examples=200, deadline=None)
@given(payloads=_valid_stream())
def test_a_well_formed_stream_gives_back_what_it_carried(payloads: list[str]) -> None:
    parser = ChunkParser()
    events = [e for p in payloads for e in parser.feed_payload(p)] + parser.finish()

    chunks = [json.loads(p) for p in payloads[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(
        d.get("content", "") for d in deltas
    )
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "".join(
        d.get("reasoning_content", "") for d in deltas
    )
    names = {c["function"]["name"] for d in deltas for c in d.get("tool_calls", [])}
    assert {e.call.name for e in events if isinstance(e, ToolCallDelta)} <= names
    assert isinstance(events[-1], Finished)


@settings(max_examples=400, deadline=None)
@given(payloads=_PAYLOADS)
def test_any_chunks_give_well_typed_events_or_a_provider_error(payloads: list[str]) -> None:
    parser = ChunkParser()
    events: list[StreamEvent] = []
    try:
        for payload in payloads:
            events.extend(parser.feed_payload(payload))
            if parser.done:
                break
        events.extend(parser.finish())
    except ProviderError:
        return
    assert all(_well_typed(e) for e in events)
    assert isinstance(events[-1], Finished)


@settings(max_examples=200, deadline=None)
@given(body=_VALUES.map(json.dumps) | st.text(max_size=40))
def test_any_completion_body_gives_events_or_a_provider_error(body: str) -> None:
    try:
        events = parse_completion(body.encode())
    except ProviderError:
        return
    assert all(_well_typed(e) for e in events)


@settings(max_examples=100, deadline=None)
@given(payloads=_PAYLOADS)
async def test_a_scripted_stream_of_any_chunks_ends_in_events_or_a_provider_error(
    payloads: list[str],
) -> None:
    provider = ScriptedProvider(default=Reply(raw_sse=payloads))
    request = ModelRequest(model="m", contents=[Content.user("hi")])
    try:
        events = [event async for event in provider.stream(request)]
    except ProviderError:
        return
    assert all(_well_typed(e) for e in events if not isinstance(e, StreamRetry))


def feed(*chunks: dict[str, Any]) -> list[StreamEvent]:
    parser = ChunkParser()
    events: list[StreamEvent] = []
    for chunk in chunks:
        events.extend(parser.feed_payload(json.dumps(chunk)))
    return events + parser.finish()


def test_content_given_as_a_list_of_text_parts_is_read_as_text() -> None:
    events = feed(
        {"choices": [{"delta": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "stop"}]},
    )

    assert events[0] == TextDelta("ab")


@pytest.mark.parametrize(
    ("wire", "cairn"),
    [("stop", "stop"), ("eos", "stop"), ("end_turn", "stop"), ("stop_sequence", "stop"),
     ("length", "length"), ("content_filter", "filter"), ("tool_calls", "tool_calls"),
     ("abort", "abort")],
)  # fmt: skip
def test_finish_reasons_read_as_cairns_and_an_unknown_one_as_it_is(wire: str, cairn: str) -> None:
    """Servers spell a normal end their own way (eos, end_turn); one cairn does not know is
    kept as the server said it, so the turn can report it."""
    events = feed({"choices": [{"delta": {"content": "x"}, "finish_reason": wire}]})

    assert isinstance(events[-1], Finished) and events[-1].reason == cairn


def test_usage_counts_and_cached_tokens_are_read() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    events = feed(
        {"choices": [{"delta": {"content": "x"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": usage},
    )

    assert events[-1] == Finished("stop", Usage(100, 7, 107, 64, 3))


@pytest.mark.parametrize(
    ("chunk", "named"),
    [
        ({"choices": "none"}, "choices is a string"),
        ({"choices": [3]}, "choices[0] is a number"),
        ({"choices": [{"delta": {"content": 5}}]}, "choices[0].content is a number"),
        ({"choices": [{"finish_reason": 1}]}, "choices[0].finish_reason"),
        ({"choices": [{"delta": {"tool_calls": [{"index": -1}]}}]}, "tool_calls[0].index"),
        ({"choices": [], "usage": {"prompt_tokens": -4}}, "usage.prompt_tokens"),
        ({"choices": [], "usage": {"total_tokens": True}}, "usage.total_tokens"),
        ({"choices": [], "usage": "lots"}, "usage is a string"),
    ],
)
def test_a_malformed_field_is_named_in_the_error(chunk: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidStreamError, match="malformed") as failure:
        ChunkParser().feed_payload(json.dumps(chunk))

    assert named in str(failure.value)


def test_a_non_object_payload_is_malformed() -> None:
    with pytest.raises(InvalidStreamError, match="the chunk is a list"):
        ChunkParser().feed_payload("[1, 2]")


def test_deeply_nested_json_is_an_invalid_stream_not_a_recursion_error() -> None:
    with pytest.raises(InvalidStreamError):
        ChunkParser().feed_payload("[" * 100_000 + "]" * 100_000)


def test_a_call_without_an_id_is_named_by_its_index_and_an_unnamed_call_is_dropped() -> None:
    calls = [
        {"index": 1, "function": {"name": "glob", "arguments": "{}"}},
        {"index": 2, "id": "x", "function": {"arguments": "{}"}},
    ]
    events = feed(
        {"choices": [{"delta": {"tool_calls": calls}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    )

    found = [e.call for e in events if isinstance(e, ToolCallDelta)]
    assert [c.name for c in found] == ["glob"]
    assert found[0].id.startswith("call_") and found[0].id.endswith("_1")


def test_an_answer_that_says_nothing_is_an_empty_response() -> None:
    with pytest.raises(InvalidStreamError) as raised:
        feed({"choices": [{"delta": {}, "finish_reason": "stop"}]})

    assert raised.value.kind == "no_response"
