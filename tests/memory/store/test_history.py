"""The audit trail: one atomic line per change, read back newest first."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from cairn.memory.store.history import (
    HISTORY_FILE_NAME,
    KEEP_HISTORY_ENTRIES,
    HistoryEntry,
    append_history,
    read_history,
)
from cairn.memory.store.scan import walk_root

T0 = 1_750_000_000.0


def entry(operation: str, when: float = T0, files: list[str] | None = None) -> HistoryEntry:
    return HistoryEntry(when, operation, "project", files or ["feedback/a.md"], "s1")


def test_entries_read_back_newest_first_across_roots(tmp_path: Path) -> None:
    project, user = tmp_path / "project", tmp_path / "user"
    append_history(project, entry("extract", T0))
    append_history(user, HistoryEntry(T0 + 5, "dream", "user", ["user/me.md"]))
    append_history(project, entry("forget", T0 + 10))

    entries, warnings = read_history([("project", project), ("user", user)])

    assert [e.operation for e in entries] == ["forget", "dream", "extract"]
    assert entries[1].scope == "user" and not warnings


def test_a_line_records_when_what_which_files_and_which_session(tmp_path: Path) -> None:
    append_history(tmp_path, entry("extract"))

    [line] = (tmp_path / HISTORY_FILE_NAME).read_text().splitlines()
    data = json.loads(line)
    assert data["op"] == "extract" and data["files"] == ["feedback/a.md"]
    assert data["sessionId"] == "s1" and data["time"].startswith("2025-06-15T")


def test_corrupt_lines_are_skipped_with_a_warning(tmp_path: Path) -> None:
    append_history(tmp_path, entry("extract"))
    with open(tmp_path / HISTORY_FILE_NAME, "a") as handle:
        handle.write("{broken\n")
        handle.write('{"op": "x"}\n')

    entries, warnings = read_history([("project", tmp_path)])

    assert len(entries) == 1
    assert len(warnings) == 2
    assert f"{HISTORY_FILE_NAME}:2: skipped" in warnings[0]
    assert f"{HISTORY_FILE_NAME}:3: skipped" in warnings[1]


def _append_many(root: str, worker: int) -> None:
    for i in range(200):
        append_history(Path(root), entry(f"w{worker}-{i}", files=[f"feedback/{'x' * 300}.md"]))


def test_concurrent_processes_never_interleave_lines(tmp_path: Path) -> None:
    workers = [
        multiprocessing.get_context("spawn").Process(target=_append_many, args=(str(tmp_path), w))
        for w in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)

    lines = (tmp_path / HISTORY_FILE_NAME).read_text().splitlines()
    assert all(json.loads(line)["op"].startswith("w") for line in lines)
    assert len(lines) >= KEEP_HISTORY_ENTRIES  # trims keep the newest; nothing torn


def test_a_long_trail_is_trimmed_to_its_newest_entries(tmp_path: Path) -> None:
    big = ["feedback/" + "y" * 500 + ".md"]
    for i in range(700):
        append_history(tmp_path, entry(f"op{i}", T0 + i, big))

    entries, _ = read_history([("project", tmp_path)])

    assert entries[0].operation == "op699"
    assert len(entries) < 700


def test_the_trail_is_never_scanned_as_a_memory(tmp_path: Path) -> None:
    append_history(tmp_path, entry("extract"))

    assert walk_root(str(tmp_path)).keys == {}
