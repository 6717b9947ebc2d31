"""Parsing the event stream into DaemonEvents."""

from __future__ import annotations

from collections.abc import AsyncIterator

from hypothesis import given
from hypothesis import strategies as st

from cairn.sdk._sse import parse_events
from cairn.sdk.types import DaemonEvent


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


async def parse(*items: str) -> list[DaemonEvent]:
    return [event async for event in parse_events(lines(*items))]


async def test_an_envelope_becomes_an_event() -> None:
    [event] = await parse(
        "id: 3",
        "event: session_update",
        'data: {"id":3,"v":1,"type":"session_update","data":{"sessionUpdate":"plan"}}',
        "",
    )

    assert (event.id, event.type, event.update_kind) == (3, "session_update", "plan")


async def test_heartbeats_and_comments_are_skipped() -> None:
    events = await parse(": heartbeat", "", 'data: {"type":"x","data":{}}', "")

    assert [e.type for e in events] == ["x"]


async def test_a_synthetic_frame_has_no_id() -> None:
    [event] = await parse(
        "event: replay_complete", 'data: {"type":"replay_complete","data":{}}', ""
    )

    assert event.id is None


async def test_malformed_frames_are_dropped() -> None:
    events = await parse("data: {not json", "", "data: [1]", "", 'data: {"data":{}}', "", "")

    assert events == []


async def test_the_id_line_is_used_when_the_envelope_lacks_one() -> None:
    [event] = await parse("id: 9", 'data: {"type":"x","data":{}}', "")

    assert event.id == 9


@given(st.lists(st.text(alphabet=st.characters(exclude_characters="\r\n")), max_size=20))
async def test_any_lines_parse_without_an_exception(items: list[str]) -> None:
    await parse(*items, "")
