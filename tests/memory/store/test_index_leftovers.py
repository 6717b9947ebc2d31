"""What a saved index's writers leave behind when they are killed, and what a process holds.

A snapshot write (a compaction, a whole save), and the ``.dirs`` and ``.seen`` files beside the
index, go through temp files renamed into place. A writer killed between the two (``kill -9``,
or a daemon compaction thread ended by the interpreter's exit) leaves its temp file; the next
process that loads the index removes those of writers that no longer exist, and the index it
loads is whole. The children here are real ``cairn memory`` processes stopped at the rename (a
profile hook: the code under test runs unchanged) and killed there.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.config.settings import Settings
from cairn.memory.manager import MemoryManager
from cairn.memory.paths import index_paths, memory_roots
from cairn.memory.store.cache import COMPACT_ENTRIES, ShardCache, load_cache
from cairn.memory.store.folders import read_folders
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.parse import render_memory_file
from cairn.memory.store.scorer import DEFAULT_SCORER
from cairn.memory.store.seen import read_seen

from ...entry_point import run_main
from ...polling import eventually

# ``cairn ARGS...`` stopped for good at the first os.replace called from function STOP_IN,
# having created the file MARKER to say so
_STOPPED_CHILD = """
import os, sys, time
marker, stop_in = sys.argv[1:3]
from cairn.cli.main import main

def stop(frame, event, arg):
    if event == "c_call" and arg is os.replace and frame.f_code.co_name == stop_in:
        sys.setprofile(None)
        open(marker, "w").close()
        time.sleep(600)

sys.argv = ["cairn", *sys.argv[3:]]
sys.setprofile(stop)
main()
"""
# ``cairn ARGS...`` whose compactions run in their thread (as a large index's do), the thread
# held up at its rename until the command has ended and the exiting main thread joins it (the
# wait under test; without it, the process ends first and the hold runs out with it)
_SLOW_COMPACTOR_CHILD = """
import os, sys, threading, time
from cairn.cli.main import main
from cairn.memory.store import shard

shard._INLINE_COMPACT_BYTES = 0  # (the size above which the index is compacted in a thread)
ended = threading.Event()

def joined_by_the_exit():
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None and frame.f_code.co_name != "join":
        frame = frame.f_back
    return ended.is_set() and frame is not None

def slow(frame, event, arg):
    if event == "c_call" and arg is os.replace and frame.f_code.co_name == "_swap_in":
        sys.setprofile(None)
        deadline = time.monotonic() + 60
        while not joined_by_the_exit() and time.monotonic() < deadline:
            time.sleep(0.01)

threading.setprofile(slow)
sys.argv = ["cairn", *sys.argv[1:]]
try:
    main()
finally:
    ended.set()
"""
_DEADLINE_SECONDS = 60.0


class Project:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "project"
        self.dir.mkdir()
        self.env = {
            "CAIRN_HOME": str(tmp_path / "home"),
            "HOME": str(tmp_path),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        self.roots = memory_roots(self.dir, environ=self.env)
        assert self.roots.project is not None
        self.root = self.roots.project
        self.index = index_paths(self.roots)[0]

    def write(self, name: str, body: str) -> Path:
        path = self.root / "project" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_memory_file(name, f"about {body}", "project", body))
        return path

    def temps(self) -> list[str]:
        folder = self.index.parent
        return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))

    def killed_at(self, stop_in: str, *args: str) -> list[str]:
        """Run ``cairn ARGS`` until it renames a temp file from ``stop_in``, SIGKILL it there;
        the temp files it left."""
        marker = self.dir.parent / f"stopped-{stop_in}"
        child = subprocess.Popen(
            [sys.executable, "-c", _STOPPED_CHILD, str(marker), stop_in, *args],
            cwd=self.dir, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            stopped = eventually(
                lambda: marker.exists() or child.poll() is not None, _DEADLINE_SECONDS
            )
            assert stopped, f"cairn {args} never renamed a temp file"
            if not marker.exists():
                out, err = child.communicate()
                pytest.fail(f"cairn {args} ended ({child.returncode}): {out!r} {err!r}")
            assert self.temps(), "stopped at the rename, with its temp file written"
            child.send_signal(signal.SIGKILL)
            child.wait()
        finally:
            if child.poll() is None:
                child.kill()
            child.communicate()
        marker.unlink()
        return self.temps()

    def run(self, *args: str) -> None:
        result = run_main(args, cwd=self.dir, env=self.env)
        assert result.returncode == 0, result.stderr

    def saved(self) -> ShardCache | None:
        return load_cache(self.index, root=str(self.root), scope="project",
                          fingerprint=DEFAULT_SCORER.fingerprint())  # fmt: skip

    def check_index(self) -> None:
        """The saved index loads, and says what the files say (nothing to read again)."""
        assert self.saved() is not None
        store = MemoryStore(self.roots)
        try:
            assert store.refresh().reparsed == 0
            files = {p.relative_to(self.root).as_posix() for p in self.root.glob("*/*.md")}
            assert {doc.relative_path for doc in store.docs()} == files
        finally:
            store.close()


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def test_a_compaction_killed_mid_write_leaves_temp_files_the_next_load_removes(
    project: Project,
) -> None:
    """``cairn memory forget`` pushes the journal past :data:`COMPACT_ENTRIES`: its compaction
    (in a daemon thread for a large index) is killed with its new snapshot written."""
    compactable(project)

    left = project.killed_at("_swap_in", "memory", "forget", "--yes", "note3")

    assert any(name.startswith(".project.bin.") for name in left), left
    assert any(name.startswith(".project.") and ".txt." in name for name in left), left
    project.run("memory", "search", "ledger")
    assert project.temps() == []
    project.check_index()


def compactable(project: Project) -> None:
    """A saved index whose next journal entry calls for a compaction."""
    for n in range(8):
        project.write(f"note{n}", f"ledger payout fact {n}")
    project.run("memory", "reindex")
    store = MemoryStore(project.roots)
    store.refresh()
    for n in range(COMPACT_ENTRIES):  # one append: the journal holds COMPACT_ENTRIES entries
        project.write(f"extra{n}", f"retry deploy {n}")
    store.refresh()
    store.save()
    store.close()
    saved = project.saved()
    assert saved is not None and saved.journal_entries == COMPACT_ENTRIES


def test_a_command_that_compacts_in_a_thread_lets_it_finish_before_the_process_exits(
    project: Project,
) -> None:
    """``cairn memory forget`` never closes its store; its compaction thread (a daemon) used to
    die with the interpreter, its temp files left and the journal not folded."""
    compactable(project)
    before = project.saved()
    assert before is not None

    result = subprocess.run(
        [sys.executable, "-c", _SLOW_COMPACTOR_CHILD, "memory", "forget", "--yes", "note3"],
        cwd=project.dir, env=project.env, capture_output=True, text=True,
        timeout=_DEADLINE_SECONDS,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert project.temps() == []
    after = project.saved()
    assert after is not None and after.generation != before.generation  # folded
    assert after.journal_entries == 0
    project.check_index()


@pytest.mark.parametrize(
    ("command", "kept"),
    [
        (("memory", "search", "ledger"), ".project.dirs."),  # the folders' check
        (("memory", "reindex"), ".project.seen."),  # find's check
    ],
)
def test_a_check_file_write_killed_mid_write_leaves_a_temp_file_the_next_load_removes(
    project: Project, command: tuple[str, ...], kept: str
) -> None:
    for n in range(8):
        project.write(f"note{n}", f"ledger payout fact {n}")
    project.run("memory", "reindex")
    for path in project.index.parent.glob("project.*"):
        if path.suffix in (".dirs", ".seen"):
            path.unlink()  # the next check writes it again

    left = project.killed_at("write_check_file", *command)

    assert [name for name in left if name.startswith(kept)] == left != []
    project.run(*command)
    assert project.temps() == []
    root = str(project.root)
    written = read_folders(project.index, root) if kept.endswith("dirs.") else read_seen(
        project.index, root
    )  # fmt: skip
    assert written is not None
    project.check_index()


def test_a_live_writers_temp_file_is_left_alone(project: Project) -> None:
    """A temp file named for a process that still runs is that process's write under way."""
    project.write("note", "ledger payout")
    project.run("memory", "reindex")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        live = project.index.parent / f".project.dirs.pid{sleeper.pid}.tmp"
        live.write_bytes(b"half a file")
        project.run("memory", "search", "ledger")
        assert live.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    project.run("memory", "search", "ledger")
    assert not live.exists()  # its writer is gone now


def inotify_descriptors() -> int:
    """This process's open inotify instances."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux only")
def test_a_closed_manager_and_in_process_commands_hold_no_inotify_descriptor(
    project: Project,
) -> None:
    """The watchers are closed at close, not left to the garbage collector (off here)."""
    for n in range(4):
        project.write(f"note{n}", f"ledger payout fact {n}")
    baseline = inotify_descriptors()
    collecting = gc.isenabled()
    gc.disable()
    try:
        manager = MemoryManager(project.dir, settings=Settings(), environ=project.env)
        manager.store.refresh()
        assert inotify_descriptors() > baseline  # (the watchers were opened)
        manager.close()
        assert inotify_descriptors() == baseline
        for command in (
            ("memory", "list"), ("memory", "search", "ledger"), ("memory", "show", "note1"),
            ("memory", "recall", "ledger"), ("memory", "verify"), ("memory", "reindex"),
            ("memory", "log"), ("memory", "forget", "--yes", "note2"),
        ):  # fmt: skip
            project.run(*command)
            assert inotify_descriptors() == baseline, command
    finally:
        if collecting:
            gc.enable()
