"""extract-pending.json: sessions whose extraction a shutdown cut short, for the next session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.memory.background.pending import (
    MAX_PENDING_SESSIONS,
    PENDING_FILE_NAME,
    add_pending,
    claim_session,
    drop_pending,
    is_claimed,
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


# A process that holds the descriptor it was given until its stdin closes.
HOLDER = "import sys; sys.stdin.read()"


def test_a_claim_handed_to_a_child_outlives_its_claimer_until_the_child_dies(
    tmp_path: Path,
) -> None:
    """cairn -p claims its session for the extract worker it starts and exits: the worker
    holds the claim alone, and the next session leaves that session to it; once the worker is
    gone (here killed), the session is the next extraction's again."""
    add_pending(tmp_path, "s1", now=T0)
    claim = claim_session(tmp_path, "s1")
    assert claim is not None
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, pass_fds=(claim.fd,)
    )
    try:
        os.close(claim.fd)  # the claimer exits: only the child holds the lock now

        assert is_claimed(tmp_path, "s1")
        assert claim_session(tmp_path, "s1") is None
        assert take_pending(tmp_path, besides="s2", now=T0) is None
        assert read_pending(tmp_path, now=T0) == ["s1"]  # left to its holder, not dropped
    finally:
        child.kill()
        child.wait()

    assert not is_claimed(tmp_path, "s1")
    assert take_pending(tmp_path, besides="s2", now=T0) == "s1"


def test_a_released_claim_can_be_taken_again_and_leaves_no_file(tmp_path: Path) -> None:
    claim = claim_session(tmp_path, "s1")
    assert claim is not None
    assert is_claimed(tmp_path, "s1")

    claim.release()

    assert not is_claimed(tmp_path, "s1")
    assert list((tmp_path / "extract-claims").iterdir()) == []
    again = claim_session(tmp_path, "s1")
    assert again is not None
    again.release()


def test_a_claimed_session_is_skipped_for_an_older_free_one(tmp_path: Path) -> None:
    add_pending(tmp_path, "old", now=T0)
    add_pending(tmp_path, "new", now=T0)
    claim = claim_session(tmp_path, "new")
    assert claim is not None
    try:
        assert take_pending(tmp_path, besides="other", now=T0) == "old"
        assert read_pending(tmp_path, now=T0) == ["new"]
    finally:
        claim.release()


def test_drop_pending_removes_only_that_session(tmp_path: Path) -> None:
    add_pending(tmp_path, "s1", now=T0)
    add_pending(tmp_path, "s2", now=T0)

    drop_pending(tmp_path, "s1", now=T0)
    drop_pending(tmp_path, "absent", now=T0)

    assert read_pending(tmp_path, now=T0) == ["s2"]


def test_a_claim_refuses_what_is_not_a_session_id(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a session id"):
        claim_session(tmp_path, "../escape")


def test_a_claimed_session_extracting_itself_stays_pending_until_it_is_done(
    tmp_path: Path,
) -> None:
    """A worker extracting its own session may die: its session must stay pending meanwhile."""
    add_pending(tmp_path, "mine", now=T0)
    claim = claim_session(tmp_path, "mine")
    assert claim is not None
    try:
        assert take_pending(tmp_path, besides="mine", now=T0) is None
        assert read_pending(tmp_path, now=T0) == ["mine"]
    finally:
        claim.release()
