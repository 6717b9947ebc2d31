"""The saved index at scale (issue #28): a write appends to a journal instead of rewriting the
snapshot, the journal is compacted, damage anywhere is rebuilt with one warning, a saved index is
served before its check against the files ends, and a first scan reads through worker processes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn import debug_log
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.bulk import IndexingStopped
from cairn.memory.store.cache import COMPACT_ENTRIES, compact, load_cache
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.parse import render_memory_file
from cairn.memory.store.scorer import DEFAULT_SCORER

from ...polling import DEADLINE_SECONDS, eventually
from ..memory_helpers import fill_memories, scan_workers

QUERIES = ("ledger payout", "retry the deploy", "发布流程", "uv install", "nothing matches zzz")


def write(root: Path, relative: str, body: str, *, name: str = "") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(name or path.stem, f"about {body}", "project", body))
    return path


@pytest.fixture
def roots(tmp_path: Path) -> MemoryRoots:
    return MemoryRoots(
        project=tmp_path / "p" / "memory", user=tmp_path / "u", state_dir=tmp_path / "p"
    )


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "index"


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    session = f"persistence-{tmp_path.name}"
    debug_log.set_process_session(session)
    yield debug_log.log_path(session)
    debug_log.set_process_session(None)


def warnings_about(log: Path, folder: Path) -> list[str]:
    """The warnings of this test (the log also gets lines other tests logged with no session)."""
    return [
        line for line in log.read_text("utf-8").splitlines()
        if "[WARN]" in line and str(folder) in line
    ]  # fmt: skip


def project(roots: MemoryRoots) -> Path:
    assert roots.project is not None
    return roots.project


def seed(roots: MemoryRoots, count: int = 12) -> None:
    words = ["ledger", "payout", "retry", "deploy", "uv", "install", "发布流程", "测试"]
    for n in range(count):
        body = " ".join(words[(n + k) % len(words)] for k in range(3)) + f" fact {n}"
        write(project(roots), f"project/m{n}.md", body)
    write(roots.user, "user/u.md", "ledger of the user")


def ranking(store: MemoryStore) -> list[list[tuple[str, float]]]:
    return [
        [(f"{h.doc.scope}:{h.doc.relative_path}", h.score) for h in store.rank(q, limit=5)]
        for q in QUERIES
    ]


def fresh_ranking(roots: MemoryRoots, tmp_path: Path) -> list[list[tuple[str, float]]]:
    """What a store built from scratch over the same files ranks."""
    store = MemoryStore(roots, cache_dir=tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}")
    store.refresh()
    return ranking(store)


def saved_store(roots: MemoryRoots, cache: Path) -> MemoryStore:
    store = MemoryStore(roots, cache_dir=cache)
    store.refresh()
    store.save()
    return store


def test_a_write_appends_to_the_journal_and_never_rewrites_the_snapshot(
    roots: MemoryRoots, cache: Path, tmp_path: Path
) -> None:
    seed(roots)
    store = saved_store(roots, cache)
    snapshot = (cache / "project.bin").stat()
    journal = (cache / "project.jnl").stat().st_size

    write(project(roots), "feedback/new.md", "payout ledger retry, written later")
    (project(roots) / "project" / "m3.md").unlink()
    store.refresh()
    store.save()

    after = (cache / "project.bin").stat()
    assert (after.st_ino, after.st_mtime_ns) == (snapshot.st_ino, snapshot.st_mtime_ns)
    assert 0 < (cache / "project.jnl").stat().st_size - journal < 4096  # two small entries
    reopened = MemoryStore(roots, cache_dir=cache)
    assert reopened.refresh().reparsed == 0  # the journal had both changes
    assert ranking(reopened) == ranking(store) == fresh_ranking(roots, tmp_path)


def test_the_journal_is_folded_into_a_new_snapshot_once_it_grows(
    roots: MemoryRoots, cache: Path, tmp_path: Path
) -> None:
    seed(roots)
    store = saved_store(roots, cache)
    first = (cache / "project.bin").stat().st_ino
    for n in range(COMPACT_ENTRIES + 2):
        write(project(roots), f"feedback/w{n % 40}.md", f"payout round {n}")
        store.refresh()
        store.save()
    store.close()  # waits for a compaction under way

    assert (cache / "project.bin").stat().st_ino != first
    assert (cache / "project.jnl").stat().st_size < 4096
    assert len(list(cache.glob("project.*.txt"))) == 1  # the old texts file is gone
    reopened = MemoryStore(roots, cache_dir=cache)
    assert reopened.refresh().reparsed == 0
    assert ranking(reopened) == fresh_ranking(roots, tmp_path)


def test_entries_appended_while_a_compaction_runs_are_kept(roots: MemoryRoots, cache: Path) -> None:
    """Whatever the interleaving, every change ends in the snapshot or in the new journal."""
    seed(roots)
    writer = saved_store(roots, cache)
    for n in range(20):
        write(project(roots), f"feedback/a{n}.md", f"first batch {n}")
    writer.refresh()
    writer.save()
    path = cache / "project.bin"
    options = {"root": str(project(roots)), "scope": "project",
               "fingerprint": DEFAULT_SCORER.fingerprint()}  # fmt: skip
    compacting = threading.Thread(target=compact, args=(path,), kwargs=options)
    compacting.start()
    for n in range(20):
        write(project(roots), f"feedback/b{n}.md", f"second batch {n}")
        writer.refresh()
        writer.save()
    compacting.join()

    loaded = load_cache(path, **options)
    assert loaded is not None
    names = set(loaded.records.keys)
    assert {f"feedback/a{n}.md" for n in range(20)} <= names
    assert {f"feedback/b{n}.md" for n in range(20)} <= names
    assert MemoryStore(roots, cache_dir=cache).refresh().reparsed == 0


def test_a_torn_journal_entry_is_said_once_and_its_file_read_again(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path
) -> None:
    """A writer killed in the middle of an append leaves half an entry."""
    seed(roots)
    store = saved_store(roots, cache)
    write(project(roots), "feedback/late.md", "retry ledger late")
    store.refresh()
    store.save()
    journal = cache / "project.jnl"
    journal.write_bytes(journal.read_bytes()[:-7])

    reopened = MemoryStore(roots, cache_dir=cache)
    report = reopened.refresh()

    assert report.reparsed == 1  # the memory of the torn entry, found again by its stat
    assert ranking(reopened) == fresh_ranking(roots, tmp_path)
    [warning] = warnings_about(log, tmp_path)
    assert "a damaged or torn entry" in warning
    reopened.save()  # the damaged journal is replaced by a whole snapshot
    assert MemoryStore(roots, cache_dir=cache).refresh().reparsed == 0


@pytest.mark.parametrize("damage", ["snapshot", "texts-truncated", "texts-missing", "journal"])
def test_a_damaged_saved_index_is_rebuilt_with_one_warning(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path, damage: str
) -> None:
    seed(roots)
    store = saved_store(roots, cache)
    write(project(roots), "feedback/late.md", "retry ledger late")
    store.refresh()
    store.save()
    [texts] = cache.glob("project.*.txt")
    if damage == "snapshot":
        data = bytearray((cache / "project.bin").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (cache / "project.bin").write_bytes(bytes(data))
    elif damage == "texts-truncated":
        texts.write_bytes(texts.read_bytes()[:-10])
    elif damage == "texts-missing":
        texts.unlink()
    else:  # an entry whose frame checks out but whose content is garbage
        from cairn.memory.store.journal import frame

        with (cache / "project.jnl").open("ab") as handle:
            handle.write(frame(b"not a marshal payload"))

    reopened = MemoryStore(roots, cache_dir=cache)
    report = reopened.refresh()

    assert report.reparsed == 13  # every project memory read again
    assert ranking(reopened) == fresh_ranking(roots, tmp_path)
    assert len(warnings_about(log, tmp_path)) == 1


def test_texts_damaged_after_loading_are_found_when_read_and_rebuilt(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path
) -> None:
    seed(roots)
    saved_store(roots, cache)
    reopened = MemoryStore(roots, cache_dir=cache)
    reopened.refresh()
    [texts] = cache.glob("project.*.txt")
    data = bytearray(texts.read_bytes())
    for at in range(len(data) // 3, len(data) - 1, 7):
        data[at] ^= 0x55  # bit rot in most records
    texts.write_bytes(bytes(data))

    assert ranking(reopened) == fresh_ranking(roots, tmp_path)
    fresh = MemoryStore(roots, cache_dir=tmp_path / "x")
    assert [doc.body for doc in reopened.docs()] == [doc.body for doc in fresh.docs()]
    assert len(warnings_about(log, tmp_path)) == 1


def test_a_provisional_refresh_never_serves_a_memory_changed_while_no_store_ran(
    roots: MemoryRoots, cache: Path, tmp_path: Path
) -> None:
    seed(roots)
    saved_store(roots, cache).close()
    (project(roots) / "project" / "m1.md").unlink()  # by hand, with no cairn running
    write(project(roots), "project/m2.md", "rewritten with other words entirely")

    store = MemoryStore(roots, cache_dir=cache)
    store.refresh(provisional=True)
    served = {path for result in ranking(store) for path, _ in result}
    recent = {doc.relative_path for doc in store.recent(limit=50)}

    assert "project:project/m1.md" not in served and "project/m1.md" not in recent
    assert "project:project/m2.md" not in served  # its saved copy is out of date
    store.refresh()  # waits for the check and applies it
    assert ranking(store) == fresh_ranking(roots, tmp_path)


def test_a_first_scan_through_worker_processes_equals_one_file_by_file(
    roots: MemoryRoots, tmp_path: Path, log: Path
) -> None:
    """Regression: the workers' task was built with ``dataclasses.asdict`` of the scorer's
    settings, which failed once ScorerConfig became a Value, and every first scan quietly
    fell back to reading all the files in one process (100,000 memories: 251 s wall)."""
    seed(roots, count=40)
    (project(roots) / "project" / "broken.md").write_text("no front matter at all")
    by_workers = MemoryStore(roots, cache_dir=tmp_path / "w", bulk_files=1, workers=2)
    by_file = MemoryStore(roots, cache_dir=tmp_path / "f", bulk_files=10**9)

    assert by_workers.refresh().warnings == by_file.refresh().warnings != []
    assert "41 files in 2 worker processes" in log.read_text("utf-8")
    assert "memory scan workers failed" not in log.read_text("utf-8")
    assert ranking(by_workers) == ranking(by_file)
    assert [d.relative_path for d in by_workers.docs()] == [d.relative_path for d in by_file.docs()]
    by_workers.save()  # the first scan saved its snapshot already: nothing is rewritten
    reopened = MemoryStore(roots, cache_dir=tmp_path / "w")
    assert reopened.refresh().reparsed == 0
    assert ranking(reopened) == ranking(by_file)


def test_a_first_scan_whose_workers_cannot_start_reads_the_files_here(
    roots: MemoryRoots, tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(roots, count=20)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    store = MemoryStore(roots, cache_dir=tmp_path / "w", bulk_files=1, workers=2)

    assert store.refresh().reparsed == 21  # and the user memory
    assert ranking(store) == fresh_ranking(roots, tmp_path)
    assert "memory scan workers failed" in log.read_text("utf-8")


class _StopAfter:
    """A stop that is set once it has been looked at ``looks`` times: a process closing in the
    middle of a first scan (what a closing process's ``threading.Event`` would say)."""

    def __init__(self, looks: int) -> None:
        self.looks = looks

    def is_set(self) -> bool:
        self.looks -= 1
        return self.looks < 0


def test_a_first_scan_stopped_half_way_saves_nothing_and_the_next_refresh_reads_all(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    """A warm-up stopped between two files of a first scan (read here, file by file) leaves the
    store as before it: its save writes no index (neither half-built nor empty), and the next
    refresh reads every file."""
    seed(roots, count=20)
    store = MemoryStore(roots, cache_dir=tmp_path / "w", bulk_files=10**9)

    with pytest.raises(IndexingStopped):
        store.warm(stop=_StopAfter(8))
    store.save()

    assert not (tmp_path / "w").exists() or not list((tmp_path / "w").iterdir())
    assert store.refresh().reparsed == 21  # and the user memory
    assert ranking(store) == fresh_ranking(roots, tmp_path)


def test_a_first_scan_stopped_while_its_workers_read_installs_nothing_and_ends_them(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    """A first scan in worker processes, stopped while it waits for them (paused here, so it
    cannot end by itself): it ends, its workers are ended, nothing is installed and no temp
    file is left; the next refresh builds the whole index."""
    fill_memories(project(roots), 2_000)
    store = MemoryStore(roots, cache_dir=tmp_path / "w", bulk_files=1, workers=2)
    stop = threading.Event()
    outcome: list[str] = []

    def warm() -> None:
        try:
            store.warm(stop=stop)
            outcome.append("indexed")
        except IndexingStopped:
            outcome.append("stopped")

    thread = threading.Thread(target=warm)
    thread.start()
    paused: list[int] = []
    try:
        assert eventually(lambda: bool(scan_workers(os.getpid())))
        for pid in scan_workers(os.getpid()):
            os.kill(pid, signal.SIGSTOP)
            paused.append(pid)
        stop.set()
        thread.join(DEADLINE_SECONDS)  # (a hang guard: forever before)
    finally:
        stop.set()
        for pid in paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        thread.join()

    assert outcome == ["stopped"]
    assert not any(Path(f"/proc/{pid}").exists() for pid in paused)
    store.save()
    assert [p.name for p in (tmp_path / "w").iterdir() if not p.name.endswith(".lock")] == []
    assert store.refresh().reparsed == 2_000
    assert MemoryStore(roots, cache_dir=tmp_path / "w").refresh().reparsed == 0


def _damage_posting_lists(path: Path) -> None:
    """Flip bytes of a snapshot's posting lists (after its head), in place."""
    data = bytearray(path.read_bytes())
    lead = len(b"cairn-recall-index\n") + 16 + 4  # magic, generation, the head's CRC-32
    area = lead + 8 + int.from_bytes(data[lead : lead + 8], "big")
    assert area < len(data)
    for at in range(area, len(data), 3):
        data[at] ^= 0x55
    path.write_bytes(bytes(data))


def test_posting_lists_damaged_after_loading_are_found_when_read_and_rebuilt(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path
) -> None:
    """The lists stay on disk once a saved index is open; each is checked when first read."""
    seed(roots)
    saved_store(roots, cache).close()
    reopened = MemoryStore(roots, cache_dir=cache)
    reopened.refresh(provisional=True)
    _damage_posting_lists(cache / "project.bin")

    assert ranking(reopened) == fresh_ranking(roots, tmp_path)
    assert len(warnings_about(log, tmp_path)) == 1


def test_damaged_posting_lists_no_query_read_are_found_by_the_check_beside_the_walk(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path
) -> None:
    """A provisional open serves the saved index at once; the check of the whole posting area
    runs with the walk, and the refresh that applies the walk rebuilds with one warning."""
    seed(roots)
    saved_store(roots, cache).close()
    _damage_posting_lists(cache / "project.bin")
    reopened = MemoryStore(roots, cache_dir=cache)
    assert reopened.refresh(provisional=True).reparsed == 0  # served before the check

    assert reopened.refresh().reparsed == 12  # the check failed: every project file read again
    assert ranking(reopened) == fresh_ranking(roots, tmp_path)
    assert len(warnings_about(log, tmp_path)) == 1


def test_a_store_that_only_reads_checks_each_posting_list_it_reads_not_all_at_open(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path
) -> None:
    """Issue #28: `cairn memory search` and `show` skip the whole posting area's CRC-32 (37 MB
    at 100,000 memories) at open; a damaged list is still found when a query reads it, and the
    index rebuilt with one warning."""
    seed(roots)
    saved_store(roots, cache).close()
    _damage_posting_lists(cache / "project.bin")
    reopened = MemoryStore(roots, cache_dir=cache, check_postings=False)
    assert reopened.refresh().reparsed == 0  # opened without reading the lists

    assert ranking(reopened) == fresh_ranking(roots, tmp_path)
    assert len(warnings_about(log, tmp_path)) == 1


def test_a_truncated_snapshot_is_rebuilt_at_open_even_by_a_store_that_only_reads(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path
) -> None:
    seed(roots)
    saved_store(roots, cache).close()
    snapshot = cache / "project.bin"
    snapshot.write_bytes(snapshot.read_bytes()[:-7])
    reopened = MemoryStore(roots, cache_dir=cache, check_postings=False)

    assert reopened.refresh().reparsed == 12  # every project file read again
    assert ranking(reopened) == fresh_ranking(roots, tmp_path)
    assert len(warnings_about(log, tmp_path)) == 1


def test_a_removal_without_the_whole_check_leaves_damaged_lists_to_the_next_full_check(
    roots: MemoryRoots, cache: Path, tmp_path: Path, log: Path
) -> None:
    """Issue #28: `cairn memory forget` no longer checks the whole posting area at open. Its
    write reads no list (the removal is noted in the journal), so damage there is still found,
    with one warning, by the next store that checks them all, and nothing of the write is
    lost."""
    seed(roots)
    saved_store(roots, cache).close()
    _damage_posting_lists(cache / "project.bin")
    forgetting = MemoryStore(roots, cache_dir=cache, check_postings=False)
    forgetting.refresh()
    (project(roots) / "project/m3.md").unlink()
    forgetting.refresh()
    forgetting.save()  # (a journal entry: the index is not rewritten)
    forgetting.close()
    assert not log.exists() or warnings_about(log, tmp_path) == []  # (no warning yet)

    checking = MemoryStore(roots, cache_dir=cache)
    assert checking.refresh().reparsed == 11  # the check failed: every project file read again
    assert "project/m3.md" not in {doc.relative_path for doc in checking.docs()}
    assert ranking(checking) == fresh_ranking(roots, tmp_path)
    assert len(warnings_about(log, tmp_path)) == 1
