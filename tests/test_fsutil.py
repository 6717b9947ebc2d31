"""Atomic writes (the new content, the old mode, no leftovers, never a half-written file) and
reads that refuse anything but a regular file."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.fsutil import (
    NotRegularFile,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    read_regular_bytes,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_atomic_write_text_replaces_the_content(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("old content that is longer than the new one\n")

    atomic_write_text(path, "new\n")

    assert path.read_text() == "new\n"
    assert _leftovers(tmp_path) == []


def test_atomic_write_text_creates_missing_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "file.txt"

    atomic_write_text(path, "héllo ✓")

    assert path.read_bytes() == "héllo ✓".encode()


def test_atomic_write_text_keeps_the_mode_of_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/sh\necho old\n")
    path.chmod(0o751)

    atomic_write_text(path, "#!/bin/sh\necho new\n")

    assert _mode(path) == 0o751
    assert path.read_text().endswith("echo new\n")


def test_a_new_file_gets_the_mode_a_plain_write_would_give(tmp_path: Path) -> None:
    """Regression: new files were created 0600 (the temp file's mode), so a file the agent
    created in the user's project was unreadable to everyone else."""
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    path = tmp_path / "atomic.txt"

    atomic_write_text(path, "x")

    assert _mode(path) == _mode(plain) == 0o666 & ~_current_umask()


def test_a_new_file_follows_a_stricter_umask(tmp_path: Path) -> None:
    previous = os.umask(0o077)
    try:
        atomic_write_text(tmp_path / "private.txt", "secret")
    finally:
        os.umask(previous)

    assert _mode(tmp_path / "private.txt") == 0o600


def test_writing_over_a_directory_fails_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "folder"
    target.mkdir()
    (target / "inside.txt").write_text("kept")

    with pytest.raises(OSError):
        atomic_write_text(target, "text")

    assert target.is_dir()
    assert (target / "inside.txt").read_text() == "kept"
    assert _leftovers(tmp_path) == []


def test_unserialisable_json_fails_and_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "meta.json"
    path.write_text('{"version": 1}\n')

    with pytest.raises(TypeError):
        atomic_write_json(path, {"value": object()})

    assert path.read_text() == '{"version": 1}\n'
    assert _leftovers(tmp_path) == []


def test_atomic_write_json_writes_indented_utf8_with_a_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "state.json"

    atomic_write_json(path, {"name": "café", "n": [1, 2]})

    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert '"café"' in text
    assert json.loads(text) == {"name": "café", "n": [1, 2]}


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text())
def test_any_text_round_trips_without_leftovers(tmp_path: Path, text: str) -> None:
    path = tmp_path / "round-trip.txt"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            atomic_write_text(path, text, durable=False)
    else:
        atomic_write_text(path, text, durable=False)
        assert path.read_bytes().decode("utf-8") == text
    assert _leftovers(tmp_path) == []


def test_a_concurrent_reader_only_ever_sees_a_complete_old_or_new_file(tmp_path: Path) -> None:
    path = tmp_path / "index.md"
    versions = [b"a" * 200_000, b"b" * 50_000, b"c\n" * 80_000]
    atomic_write_bytes(path, versions[0], durable=False)
    writes_done = threading.Event()

    def write_many() -> None:
        try:
            for i in range(300):
                atomic_write_bytes(path, versions[i % len(versions)], durable=False)
        finally:
            writes_done.set()

    writer = threading.Thread(target=write_many)
    writer.start()
    reads = 0
    while not writes_done.is_set() or reads < 50:
        data = path.read_bytes()
        assert data in versions, f"a reader saw {len(data)} bytes that no write produced"
        reads += 1
    writer.join()

    assert _leftovers(tmp_path) == []


@pytest.mark.timeout(10)
def test_read_regular_bytes_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match="not a regular file: a FIFO") as caught:
        read_regular_bytes(fifo)
    assert caught.value.kind == "a FIFO"


def test_read_regular_bytes_refuses_devices_and_folders(tmp_path: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(NotRegularFile, match="a device"):
        read_regular_bytes(tmp_path / "zero")
    with pytest.raises(NotRegularFile, match="a folder"):
        read_regular_bytes(tmp_path)


def test_read_regular_bytes_reads_a_file_up_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_regular_bytes(path) == b"0123456789"
    assert read_regular_bytes(path, limit=4) == b"0123"
    with pytest.raises(FileNotFoundError):
        read_regular_bytes(tmp_path / "missing")
