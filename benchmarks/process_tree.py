"""A benchmarked process and everything it started: memory, CPU and processes of the whole tree.

A figure read from one process's ``/proc/<pid>`` misses what its children cost (issue 32: the
daemon's checkpoint processes made a 1.3 GB tree while its own peak RSS read 58 MB). Here:

- :func:`tree_cpu_seconds`: CPU time of a process and its descendants, live ones and the ones
  already waited for (``cutime``/``cstime``); a difference of two readings is the tree's CPU;
- :class:`TreeSampler`: a thread reading the tree every few milliseconds: the peak of its summed
  RSS (the kernel keeps a peak per process only; a child not yet past ``exec`` shares its
  parent's pages and is not added), and the most processes alive at once, in all and matching a
  pattern (git...);
- :func:`become_subreaper`: orphans of the benchmark's children (a detached worker) become the
  benchmark's children instead of init's, so the tree and ``RUSAGE_CHILDREN`` still see them;
  :func:`reap_orphans` waits for them.

Linux only (``/proc``, ``prctl``).
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "TreeSampler",
    "TreeStats",
    "become_subreaper",
    "descendants",
    "reap_orphans",
    "tree_cpu_seconds",
    "tree_rss_kib",
]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PR_SET_CHILD_SUBREAPER = 36


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children of each of its threads, recursively)."""
    found: list[int] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        for child in _children(parent):
            found.append(child)
            stack.append(child)
    return found


def _children(pid: int) -> Iterator[int]:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return
    for task in tasks:
        try:
            text = (task / "children").read_text()
        except OSError:
            continue
        yield from (int(word) for word in text.split())


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its descendants, the waited-for ones included."""
    total = 0
    for member in (pid, *descendants(pid)):
        fields = _stat_fields(member)
        if fields is not None:  # utime, stime, cutime, cstime
            total += sum(int(value) for value in fields[11:15])
    return total / _CLOCK_TICKS


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(pid: int) -> int:
    """The summed resident memory of ``pid`` and its live descendants now."""
    return sum(_rss_kib(member) for member in (pid, *descendants(pid)))


def _parent(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields is not None else 0


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@dataclass
class TreeStats:
    peak_rss_kib: int = 0  # the largest summed RSS seen
    most_processes: int = 0  # the most processes (the root included) alive at once
    most_matching: int = 0  # the most alive at once whose command line matched the pattern
    samples: int = 0
    seen_matching: set[int] = field(default_factory=set)  # every matching pid seen


class TreeSampler:
    """Reads ``pid``'s tree every ``interval`` seconds in a thread until :meth:`stop`."""

    def __init__(self, pid: int, *, match: str | None = None, interval: float = 0.01) -> None:
        self.pid = pid
        self.stats = TreeStats()
        self._match = re.compile(match) if match else None
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> TreeStats:
        self._stop.set()
        self._thread.join()
        return self.stats

    def __enter__(self) -> TreeSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(self._interval)

    def sample(self) -> None:
        members = [self.pid, *descendants(self.pid)]
        lines = {m: _command_line(m) for m in members}
        # A child caught between fork and exec still maps its parent's pages (its command line
        # is the parent's): they are counted once, in the parent.
        counted = [members[0], *(m for m in members[1:] if lines[m] != lines.get(_parent(m)))]
        stats = self.stats
        stats.samples += 1
        stats.most_processes = max(stats.most_processes, len(members))
        stats.peak_rss_kib = max(stats.peak_rss_kib, sum(_rss_kib(m) for m in counted))
        if self._match is not None:
            matching = [m for m in members[1:] if self._match.search(lines[m])]
            stats.most_matching = max(stats.most_matching, len(matching))
            stats.seen_matching.update(matching)


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (False where it cannot be)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(timeout: float, keep: frozenset[int] = frozenset()) -> int:
    """Wait up to ``timeout`` seconds for this process's children other than ``keep`` (the
    orphans a subreaper adopted), so ``RUSAGE_CHILDREN`` counts them; returns how many are
    still alive then."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in _children(os.getpid()) if pid not in keep and not _reaped(pid)]
        if not alive or time.monotonic() > deadline:
            return len(alive)
        time.sleep(0.01)


def _reaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True
