"""Version logs: every change cairn makes to a memory, kept and shown as diffs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.memory.trust.versions import (
    MAX_VERSIONS,
    VERSIONS_FOLDER,
    changes,
    read_versions,
    record_version,
    version_log_path,
)

from ..memory_helpers import NOW

V1 = "---\nname: Tests\ndescription: how to test\ntype: project\n---\n\nRun pytest.\n"
V2 = V1.replace("Run pytest.", "Run make check.")


def record(root: Path, content: str | None, previous: str | None, op: str = "extract") -> None:
    record_version(root, "project/tests.md", content, previous=previous, operation=op, now=NOW,
                   session_id="s-1", why=f"{op} did it")  # fmt: skip


def test_each_change_is_a_version_with_who_and_why(tmp_path: Path) -> None:
    record(tmp_path, V1, None)
    record(tmp_path, V2, V1, "dream")
    record(tmp_path, None, V2, "forget")

    versions = read_versions(tmp_path, "project/tests.md")

    assert [(v.number, v.operation, v.content) for v in versions] == [
        (1, "extract", V1), (2, "dream", V2), (3, "forget", None),
    ]  # fmt: skip
    assert versions[1].why == "dream did it" and versions[1].session_id == "s-1"
    line = json.loads(
        (tmp_path / VERSIONS_FOLDER / "project/tests.md.jsonl").read_text().split("\n")[1]
    )
    assert line["op"] == "dream" and line["content"] == V2 and len(line["sha256"]) == 64


def test_a_change_made_outside_cairn_is_recorded_before_the_next_one(tmp_path: Path) -> None:
    record(tmp_path, V1, None)
    by_hand = V1.replace("Run pytest.", "Run pytest -q.")
    record(tmp_path, V2, by_hand)

    versions = read_versions(tmp_path, "project/tests.md")

    assert [(v.operation, v.content) for v in versions] == [
        ("extract", V1), ("outside", by_hand), ("extract", V2),
    ]  # fmt: skip


def test_a_memory_cairn_never_changed_gets_its_earlier_text_first(tmp_path: Path) -> None:
    record(tmp_path, V2, V1)
    assert [v.operation for v in read_versions(tmp_path, "project/tests.md")] == [
        "earlier",
        "extract",
    ]


def test_no_change_records_nothing(tmp_path: Path) -> None:
    record(tmp_path, V1, V1)
    assert read_versions(tmp_path, "project/tests.md") == []


def test_the_log_keeps_the_newest_versions(tmp_path: Path) -> None:
    previous = None
    for n in range(MAX_VERSIONS + 5):
        text = V1.replace("pytest", f"pytest #{n}")
        record(tmp_path, text, previous)
        previous = text
    versions = read_versions(tmp_path, "project/tests.md")
    assert len(versions) == MAX_VERSIONS
    assert versions[-1].number == MAX_VERSIONS + 5 and "#104" in (versions[-1].content or "")


def test_a_damaged_line_is_skipped(tmp_path: Path) -> None:
    record(tmp_path, V1, None)
    with (tmp_path / VERSIONS_FOLDER / "project/tests.md.jsonl").open("ab") as handle:
        handle.write(b"{broken\n\xff\n")
    record(tmp_path, V2, V1)
    assert [v.number for v in read_versions(tmp_path, "project/tests.md")] == [1, 2]


@pytest.mark.parametrize("relative", ["../x.md", "/etc/passwd", "a/../../b.md", ""])
def test_a_path_leading_out_of_the_versions_folder_is_never_used(
    tmp_path: Path, relative: str
) -> None:
    assert version_log_path(tmp_path, relative) is None
    assert record_version(tmp_path, relative, V1, previous=None, operation="x", now=NOW) is None
    assert read_versions(tmp_path, relative) == []


def test_changes_are_diffs_without_the_provenance_churn(tmp_path: Path) -> None:
    stamped = V1.replace("type: project\n", "type: project\nprovenance:\n  by: extract\n  at: 1\n")
    restamped = V2.replace("type: project\n", "type: project\nprovenance:\n  by: dream\n  at: 2\n")
    record(tmp_path, stamped, None)
    record(tmp_path, restamped, stamped, "dream")
    record(tmp_path, None, restamped, "forget")

    first, second, third = changes(read_versions(tmp_path, "project/tests.md"))

    assert first.summary == "created" and first.diff == ()  # cairn wrote it: no earlier text
    assert "-Run pytest." in second.diff and "+Run make check." in second.diff
    assert not any("provenance" in line or "by:" in line for line in second.diff)
    assert third.summary == "deleted"
