"""Lenient reads of the JSON state files and ISO times."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.background.state_files import iso_time, parse_iso_time, read_state_object

T0 = 1_750_000_000.0


def test_times_round_trip_in_the_reference_format() -> None:
    assert iso_time(T0) == "2025-06-15T15:06:40.000Z"
    assert parse_iso_time(iso_time(T0)) == T0


@pytest.mark.parametrize("value", [None, "", "yesterday", 42, "2025-13-01T00:00:00Z"])
def test_anything_else_is_not_a_time(value: object) -> None:
    assert parse_iso_time(value) is None


@given(st.text())
def test_any_text_parses_or_is_none(text: str) -> None:
    result = parse_iso_time(text)
    assert result is None or isinstance(result, float)


def test_a_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_state_object(tmp_path / "meta.json", now=T0) == {}


@pytest.mark.parametrize("content", [b"{oops", b"[1, 2]", b"\xff\xfe"])
def test_a_corrupt_file_is_moved_aside_not_lost(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "meta.json"
    path.write_bytes(content)

    assert read_state_object(path, now=T0) == {}
    assert not path.exists()
    [aside] = tmp_path.glob("meta.json.corrupt-*")
    assert aside.read_bytes() == content
