"""Reading Messages events: any event in, well-typed events or a provider error out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.llm.anthropic.stream import EventParser
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.types import Finished, StreamEvent, TextDelta, ThoughtDelta, ToolCallDelta

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=15,
)


def event(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


TOOL_USE = {"type": "tool_use", "id": "t", "name": "f", "input": {}}


def json_part(text: str) -> dict[str, str]:
    return {"type": "input_json_delta", "partial_json": text}


def valid_stream() -> list[str]:
    return [
        event("message_start", message={"usage": {"input_tokens": 10, "output_tokens": 1}}),
        event("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hm"}),
        event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "s"}),
        event("content_block_stop", index=0),
        event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Hi"}),
        event("content_block_stop", index=1),
        event("content_block_start", index=2, content_block=TOOL_USE),
        event("content_block_delta", index=2, delta=json_part('{"a":')),
        event("content_block_delta", index=2, delta=json_part("1}")),
        event("content_block_stop", index=2),
        event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 7}),
        event("message_stop"),
    ]  # fmt: skip


def read(payloads: list[str]) -> list[StreamEvent]:
    parser = EventParser()
    events = [e for p in payloads for e in parser.feed("", p)]
    return events + parser.finish()


def test_a_full_stream_gives_thoughts_text_a_call_and_usage() -> None:
    events = read(valid_stream())

    assert events[0] == ThoughtDelta("hm")
    assert events[1] == ThoughtDelta("", signature="s")
    assert events[2] == TextDelta("Hi")
    assert isinstance(events[3], ToolCallDelta) and events[3].call.args == {"a": 1}
    finished = events[4]
    assert isinstance(finished, Finished) and finished.reason == "tool_calls"
    assert (finished.usage.input_tokens, finished.usage.output_tokens) == (10, 7)


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        (event("content_block_delta", index="x", delta={}), "index is a string"),
        (event("content_block_delta", index=0, delta="text"), "delta is a string"),
        (event("message_delta", delta={"stop_reason": 3}), "delta.stop_reason is a number"),
        (event("message_start", message={"usage": {"input_tokens": -1}}), "usage.input_tokens"),
        ('{"type": "message_start", "message": {"usage": {"input_tokens": NaN}}}', "NaN"),
    ],
)
def test_a_malformed_event_names_the_field(payload: str, named: str) -> None:
    with pytest.raises(InvalidStreamError, match="malformed") as failure:
        EventParser().feed("", payload)

    assert named in str(failure.value)


@settings(max_examples=300, deadline=None)
@given(
    at=st.integers(min_value=0, max_value=13),
    replacement=_VALUES.map(json.dumps) | st.text(max_size=20),
    key=st.sampled_from(["index", "delta", "content_block", "usage", "message", "type"]),
    swap=st.booleans(),
)
def test_any_damaged_stream_gives_well_typed_events_or_a_provider_error(
    at: int, replacement: str, key: str, swap: bool
) -> None:
    payloads = valid_stream()
    if swap:
        damaged = json.loads(payloads[at])
        damaged[key] = json.loads(replacement) if _is_json(replacement) else replacement
        payloads[at] = json.dumps(damaged)
    else:
        payloads[at] = replacement
    try:
        events = read(payloads)
    except ProviderError:
        return
    for e in events:
        assert isinstance(e, TextDelta | ThoughtDelta | ToolCallDelta | Finished)
    assert isinstance(events[-1], Finished)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_a_call_without_an_id_is_named_and_an_unnamed_call_is_dropped() -> None:
    unnamed = {"type": "tool_use", "id": "u", "name": "", "input": {}}
    events = read(
        [
            event("content_block_start", index=0, content_block={**TOOL_USE, "id": ""}),
            event("content_block_stop", index=0),
            event("content_block_start", index=1, content_block=unnamed),
            event("content_block_stop", index=1),
            event("message_delta", delta={"stop_reason": "tool_use"}),
        ]
    )

    calls = [e.call for e in events if isinstance(e, ToolCallDelta)]
    assert [c.name for c in calls] == ["f"]
    assert calls[0].id.startswith("toolu_") and calls[0].id.endswith("_0")


def test_an_answer_that_says_nothing_is_an_empty_response() -> None:
    with pytest.raises(InvalidStreamError) as raised:
        read([event("message_delta", delta={"stop_reason": "end_turn"})])

    assert raised.value.kind == "no_response"
