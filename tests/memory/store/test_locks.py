"""Root locks across processes, the stale temp sweep, and Dream's consolidation.lock."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cairn.memory.store.locks import (
    ConsolidationLock,
    LockWaitStopped,
    MemoryBusy,
    hold_local_roots,
    hold_roots,
    hold_roots_async,
    lock_order,
    pid_alive,
    root_lock_path,
    sweep_stale_temp_files,
)

HOLD_SCRIPT = """
import sys, time
from pathlib import Path
from cairn.memory.store.locks import hold_roots
with hold_roots([Path(sys.argv[1])]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def hold_in_child(root: Path, seconds: float) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_SCRIPT, str(root), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_the_lock_file_sits_beside_the_root_never_inside(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    assert root_lock_path(root) == tmp_path / ".memory.lock"


def test_roots_are_locked_in_one_order_without_duplicates(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert lock_order([b, a, b]) == lock_order([a, b]) == [a, b]


def test_a_lock_held_by_another_process_makes_a_waiter_give_up(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    child = hold_in_child(root, 5)
    try:
        with pytest.raises(MemoryBusy), hold_roots([root], timeout=0.3):
            pass
    finally:
        child.kill()
        child.wait()


def test_a_stopped_wait_gives_up_at_once_and_keeps_no_lock(tmp_path: Path) -> None:
    """A wait that may be dropped (a catch-up pull at shutdown) ends when its stop event is
    set, not after its timeout, and gives back the locks it had taken already."""
    project, user = tmp_path / "project", tmp_path / "user"
    child = hold_in_child(user, 60)
    stop = threading.Event()
    ended: list[BaseException] = []

    def wait() -> None:
        try:
            with hold_local_roots([project, user], timeout=600, stop=stop):
                pass
        except BaseException as error:
            ended.append(error)

    waiter = threading.Thread(target=wait)
    try:
        waiter.start()
        stop.set()
        waiter.join(60)  # a hang guard: the wait was for 600 s
        assert not waiter.is_alive()
        assert len(ended) == 1
        assert isinstance(ended[0], LockWaitStopped)
        with hold_local_roots([project], timeout=0):  # the project's lock was given back
            pass
        with pytest.raises(LockWaitStopped), hold_local_roots([project], stop=stop):
            pass  # and a stopped wait never begins
    finally:
        child.kill()
        child.wait()


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    child = hold_in_child(root, 60)
    child.kill()  # SIGKILL: no cleanup code runs
    child.wait()

    with hold_roots([root], timeout=1):
        pass


async def test_two_tasks_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    inside: list[str] = []

    async def worker(name: str) -> None:
        async with hold_roots_async([root]):
            inside.append(f"{name} in")
            time.sleep(0.05)  # a critical section never awaits
            inside.append(f"{name} out")

    await asyncio.gather(worker("a"), worker("b"))

    assert inside in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])


async def test_an_async_waiter_holds_nothing_while_it_waits(tmp_path: Path) -> None:
    project, user = tmp_path / "project", tmp_path / "user"
    child = hold_in_child(user, 5)
    try:
        waiter = asyncio.create_task(_hold_briefly([project, user]))
        await asyncio.sleep(0.1)
        with hold_roots([project], timeout=0.5):  # free: the waiter gave it back
            pass
        waiter.cancel()
    finally:
        child.kill()
        child.wait()


async def _hold_briefly(roots: list[Path]) -> None:
    async with hold_roots_async(roots, timeout=10):
        pass


def test_a_temp_file_too_young_at_the_first_sweep_goes_at_a_later_lock(tmp_path: Path) -> None:
    """Regression (issue #28's sweep once per ten minutes): a writer killed just before this
    process first locked the root left a temp file too young to judge; it stayed until the
    next sweep ten minutes later (or for good in a short process) instead of going once stale."""
    root = tmp_path / "memory"
    root.mkdir()
    left = root / ".MEMORY.md.3c6b54655354.tmp"
    left.write_text("half an index")
    with hold_roots([root]):
        pass
    assert left.exists()  # too young to tell from a live writer's
    old = time.time() - 60
    os.utime(left, (old, old))  # ... and now it is not

    with hold_roots([root]):
        pass

    assert not left.exists()


def test_stale_temp_files_are_swept_and_fresh_ones_kept(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    (root / "feedback").mkdir(parents=True)
    stale = root / "feedback" / ".tabs.md.abc123.tmp"
    fresh = root / ".MEMORY.md.def456.tmp"
    memory = root / "feedback" / "tabs.md"
    for path in (stale, fresh, memory):
        path.write_text("x")
    old = time.time() - 60
    os.utime(stale, (old, old))
    os.utime(memory, (old, old))

    assert sweep_stale_temp_files(root) == [stale]
    assert fresh.exists() and memory.exists()


def test_a_dead_pid_is_not_alive() -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert not pid_alive(int(done.stdout))
    assert pid_alive(os.getpid())


def test_the_consolidation_lock_is_exclusive_and_released_by_its_owner(tmp_path: Path) -> None:
    lock = ConsolidationLock(tmp_path / "consolidation.lock")

    assert lock.try_acquire(time.time())
    assert lock.path.read_text().strip() == str(os.getpid())
    assert not lock.try_acquire(time.time())
    lock.release()
    assert not lock.path.exists()


def test_a_lock_of_ours_is_a_leftover_when_no_dream_of_ours_runs(tmp_path: Path) -> None:
    lock = ConsolidationLock(tmp_path / "consolidation.lock")
    lock.path.write_text(f"{os.getpid()}\n")

    assert lock.holder(time.time()) == os.getpid()
    assert lock.try_acquire(time.time(), ours_is_stale=True)


@pytest.mark.parametrize("content", ["", "not a pid", "-4", "0"])
def test_an_unreadable_lock_is_stale(tmp_path: Path, content: str) -> None:
    lock = ConsolidationLock(tmp_path / "consolidation.lock")
    lock.path.write_text(content)

    assert lock.holder(time.time()) is None
    assert not lock.path.exists()


def test_looking_without_cleaning_leaves_a_stale_lock(tmp_path: Path) -> None:
    lock = ConsolidationLock(tmp_path / "consolidation.lock")
    lock.path.write_text("garbage")

    assert lock.holder(time.time(), clean=False) is None
    assert lock.path.exists()
