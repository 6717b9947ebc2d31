"""extract-pending.json: sessions whose extraction a shutdown cut short, for the next session."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.memory.background.pending import (
    MAX_PENDING_SESSIONS,
    PENDING_FILE_NAME,
    add_pending,
    read_pending,
    take_pending,
)

T0 = 1_750_000_000.0


def test_the_newest_other_session_is_taken_and_removed(tmp_path: Path) -> None:
    add_pending(tmp_path, "s1", now=T0)
    add_pending(tmp_path, "s2", now=T0)

    assert take_pending(tmp_path, besides="s3", now=T0) == "s2"
    assert take_pending(tmp_path, besides="s3", now=T0) == "s1"
    assert take_pending(tmp_path, besides="s3", now=T0) is None


def test_the_session_extracting_now_is_no_longer_pending(tmp_path: Path) -> None:
    add_pending(tmp_path, "s1", now=T0)

    assert take_pending(tmp_path, besides="s1", now=T0) is None
    assert read_pending(tmp_path, now=T0) == []


def test_a_session_is_listed_once_and_only_the_newest_are_kept(tmp_path: Path) -> None:
    for index in range(MAX_PENDING_SESSIONS + 2):
        add_pending(tmp_path, f"s{index}", now=T0)
    add_pending(tmp_path, "s3", now=T0)

    pending = read_pending(tmp_path, now=T0)
    assert len(pending) == MAX_PENDING_SESSIONS
    assert pending[-1] == "s3" and pending.count("s3") == 1
    assert "s0" not in pending


def test_a_malformed_file_or_entry_is_ignored_not_fatal(tmp_path: Path) -> None:
    (tmp_path / PENDING_FILE_NAME).write_text('{"sessions": ["ok-1", 3, "../../etc/passwd", ""]}')
    assert read_pending(tmp_path, now=T0) == ["ok-1"]

    (tmp_path / PENDING_FILE_NAME).write_text("not json")
    assert read_pending(tmp_path, now=T0) == []
    assert take_pending(tmp_path, besides="x", now=T0) is None


def test_nothing_is_written_when_nothing_is_pending(tmp_path: Path) -> None:
    assert take_pending(tmp_path, besides="s1", now=T0) is None
    assert not (tmp_path / PENDING_FILE_NAME).exists()

    add_pending(tmp_path, "s1", now=T0)
    data = json.loads((tmp_path / PENDING_FILE_NAME).read_text())
    assert data == {"sessions": ["s1"], "updatedAt": "2025-06-15T15:06:40.000Z"}
