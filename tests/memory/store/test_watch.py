"""Kernel change notifications: what another process does to a watched folder is reported."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.memory.store.watch import TreeWatcher, open_watcher

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify is Linux-only"
)


@pytest.fixture
def watcher() -> Iterator[TreeWatcher]:
    opened = open_watcher()
    assert opened is not None
    yield opened
    opened.close()


def run(code: str, *args: str) -> None:
    subprocess.run([sys.executable, "-c", code, *args], check=True)


def test_nothing_happened_drains_to_no_changes(watcher: TreeWatcher, tmp_path: Path) -> None:
    assert watcher.watch(str(tmp_path), "")
    changes = watcher.drain()
    assert (changes.files, changes.rescan) == (set(), False)


def test_a_file_written_in_place_by_another_process_is_reported(
    watcher: TreeWatcher, tmp_path: Path
) -> None:
    (tmp_path / "user").mkdir()
    target = tmp_path / "user" / "m.md"
    target.write_text("before", "utf-8")
    watcher.watch(str(tmp_path / "user"), "user/")
    run("import sys; open(sys.argv[1], 'r+').write('after!')", str(target))
    assert watcher.drain().files == {"user/m.md"}
    assert watcher.drain().files == set()  # drained once


def test_created_renamed_and_deleted_files_are_reported(
    watcher: TreeWatcher, tmp_path: Path
) -> None:
    (tmp_path / "old.md").write_text("x", "utf-8")
    (tmp_path / "gone.md").write_text("x", "utf-8")
    watcher.watch(str(tmp_path), "")
    run(
        "import os, sys; d = sys.argv[1]\n"
        "open(os.path.join(d, 'new.md'), 'w').write('x')\n"
        "os.rename(os.path.join(d, 'old.md'), os.path.join(d, 'moved.md'))\n"
        "os.unlink(os.path.join(d, 'gone.md'))",
        str(tmp_path),
    )
    assert watcher.drain().files == {"new.md", "old.md", "moved.md", "gone.md"}


def test_a_new_folder_asks_for_a_full_walk(watcher: TreeWatcher, tmp_path: Path) -> None:
    watcher.watch(str(tmp_path), "")
    (tmp_path / "reference").mkdir()
    assert watcher.drain().rescan is True


def test_a_removed_watched_folder_asks_for_a_full_walk(
    watcher: TreeWatcher, tmp_path: Path
) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    watcher.watch(str(folder), "gone/")
    folder.rmdir()
    assert watcher.drain().rescan is True


def test_watching_a_missing_folder_fails_softly(watcher: TreeWatcher, tmp_path: Path) -> None:
    assert watcher.watch(str(tmp_path / "missing"), "missing/") is False


def test_importing_the_watcher_neither_loads_ctypes_nor_runs_a_program() -> None:
    """Regression: the module loaded libc at import through ``ctypes.util.find_library``,
    which runs ``ldconfig -p`` in a subprocess on every memory-on start-up."""
    code = (
        "import subprocess, sys\n"
        "spawned = []\n"
        "subprocess.Popen.__init__ = lambda self, *a, **k: spawned.append(a)\n"
        "import cairn.memory.store.memory_store\n"
        "print('ctypes' in sys.modules, spawned)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False []"
