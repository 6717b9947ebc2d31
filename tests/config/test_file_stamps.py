"""An answer computed from files is kept only while every file it read is unchanged, and never
when a file changed so recently that a second change could keep its timestamp."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cairn.config.file_stamps import RACY_NS, Inputs, StampedCache, stamp

from ..polling import eventually

LATER = RACY_NS * 10  # a clock this far ahead of the files makes every one of them settled


def _ahead(ns: int):  # type: ignore[no-untyped-def]
    return lambda: time.time_ns() + ns


def _next_tick(path: Path) -> None:
    """Wait until the file system's clock has moved past ``path``'s change time, as it has by
    the time a kept answer is used (the racy case is the next test's)."""
    probe = path.with_name(path.name + ".tick")

    def moved() -> bool:
        probe.write_text("")
        return probe.stat().st_ctime_ns > path.stat().st_ctime_ns

    assert eventually(moved)


def _cache_over(path: Path, clock_ahead: int = LATER) -> tuple[StampedCache[str], list[str]]:
    """A cache holding what ``path`` says, computed once; the list of readings made."""
    cache: StampedCache[str] = StampedCache(clock=_ahead(clock_ahead))
    reads: list[str] = []
    _again(cache, path, reads)
    return cache, reads


def _again(cache: StampedCache[str], path: Path, reads: list[str]) -> str:
    """What ``path`` says, from ``cache`` (each real reading is added to ``reads``)."""

    def compute() -> str:
        text = path.read_text() if path.exists() else "(none)"
        reads.append(text)
        return text

    def inputs(_: str) -> Inputs:
        found = Inputs()
        found.file(str(path))
        return found

    return cache.get("k", compute, inputs)


def test_a_settled_answer_is_given_again_without_reading(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("one")
    cache, reads = _cache_over(path)

    assert _again(cache, path, reads) == "one"
    assert reads == ["one"]
    assert cache.hits == 1


def test_an_edit_of_the_same_size_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("one")
    cache, reads = _cache_over(path)
    _next_tick(path)

    path.write_text("two")  # same size, same inode: the change time moves

    assert _again(cache, path, reads) == "two"


def test_a_restored_modification_time_does_not_hide_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("one")
    before = path.stat()
    cache, reads = _cache_over(path)
    _next_tick(path)

    path.write_text("two")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    assert _again(cache, path, reads) == "two"


def test_a_file_that_appears_or_goes_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "a.json"
    cache, reads = _cache_over(path)
    path.parent.mkdir()
    path.write_text("here")

    assert _again(cache, path, reads) == "here"

    path.unlink()
    assert _again(cache, path, reads) == "(none)"


def test_an_answer_read_from_a_file_changed_just_now_is_not_kept(tmp_path: Path) -> None:
    """Within a timestamp's granularity a second write can keep every field of the stamp."""
    path = tmp_path / "a.json"
    path.write_text("one")
    cache, reads = _cache_over(path, clock_ahead=0)

    assert _again(cache, path, reads) == "one"
    assert reads == ["one", "one"]
    assert cache.hits == 0


def test_a_new_entry_anywhere_in_a_tree_is_a_change(tmp_path: Path) -> None:
    root = tmp_path / "commands"
    (root / "deep" / "er").mkdir(parents=True)
    found = Inputs()
    found.tree(str(root), depth=8)
    assert found.unchanged()

    (root / "deep" / "er" / "new.md").write_text("x")

    assert not found.unchanged()


def test_where_a_link_leads_is_part_of_the_inputs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "a")
    found = Inputs()
    found.resolved(str(link))

    link.unlink()
    link.symlink_to(tmp_path / "b")

    assert not found.unchanged()


def test_an_answer_reading_more_paths_than_the_limit_is_not_kept(tmp_path: Path) -> None:
    for index in range(5):
        (tmp_path / f"{index}.md").write_text("x")
    cache: StampedCache[int] = StampedCache(clock=_ahead(LATER))

    def inputs(_: int) -> Inputs:
        found = Inputs(limit=3)
        found.tree(str(tmp_path), depth=1)
        return found

    cache.get("k", lambda: 1, inputs)

    assert not cache.kept("k")


def test_a_missing_path_has_no_stamp(tmp_path: Path) -> None:
    assert stamp(str(tmp_path / "missing")) is None
    assert stamp(str(tmp_path)) is not None


def test_an_environment_variable_read_is_an_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_TEST_STAMPED", "one")
    monkeypatch.delenv("CAIRN_TEST_UNSET", raising=False)
    found = Inputs()
    found.variable("CAIRN_TEST_STAMPED")
    found.variable("CAIRN_TEST_UNSET")
    monkeypatch.setenv("CAIRN_TEST_OTHER", "x")  # not read: no change
    assert found.unchanged()

    monkeypatch.setenv("CAIRN_TEST_UNSET", "")

    assert not found.unchanged()


def test_a_path_no_file_can_have_is_an_input_that_does_not_raise() -> None:
    """A hook command may name anything, a NUL byte included (the check skips it)."""
    found = Inputs()
    found.file(found.resolved("hooks/\0check.py"))

    assert found.unchanged()
