"""The record format helpers: timestamps, line parsing, recap extraction."""

from __future__ import annotations

import datetime as _dt

from hypothesis import given
from hypothesis import strategies as st

from cairn.recording.records import (
    format_timestamp,
    parse_records,
    parse_timestamp,
    recap_texts,
)


def test_timestamps_are_utc_with_milliseconds_and_z():
    moment = _dt.datetime(
        2025, 3, 1, 11, 30, 5, 123456, tzinfo=_dt.timezone(_dt.timedelta(hours=2))
    )

    assert format_timestamp(moment) == "2025-03-01T09:30:05.123Z"


def test_timestamp_round_trips():
    moment = _dt.datetime(2025, 3, 1, 9, 30, 5, 123000, tzinfo=_dt.UTC)

    assert parse_timestamp(format_timestamp(moment)) == moment


def test_unreadable_timestamps_are_none():
    assert parse_timestamp("yesterday") is None
    assert parse_timestamp(12) is None


def test_lines_without_a_string_uuid_are_skipped():
    data = b'{"uuid": "a"}\n[1, 2]\n{"uuid": 3}\n\n{"uuid": "b"}\n'

    records, warnings = parse_records(data)

    assert [r["uuid"] for r in records] == ["a", "b"]
    assert warnings == [
        "line 2: not a valid record; skipped",
        "line 3: not a valid record; skipped",
    ]


def test_unfinished_last_line_is_named_as_such():
    records, warnings = parse_records(b'{"uuid": "a"}\n{"uuid": "b", "ty')

    assert [r["uuid"] for r in records] == ["a"]
    assert warnings == ["line 2: unfinished last record (interrupted write) skipped"]


@given(st.binary(max_size=3000))
def test_any_bytes_parse_without_an_exception(data):
    records, warnings = parse_records(data)

    assert all(isinstance(r["uuid"], str) for r in records)
    assert len(records) + len(warnings) <= data.count(b"\n") + 1


def test_recaps_come_only_from_slash_command_results():
    items = [{"type": "away_recap", "text": "r"}]
    result = {
        "type": "system",
        "subtype": "slash_command",
        "systemPayload": {"phase": "result", "outputHistoryItems": items},
    }
    invocation = {**result, "systemPayload": {"phase": "invocation", "outputHistoryItems": items}}

    assert recap_texts(result) == ["r"]
    assert recap_texts(invocation) == []
    assert recap_texts({"type": "user", "systemPayload": result["systemPayload"]}) == []
