"""The memory-pressure gate of Extract and Dream: skip background work on a starved machine.

A memory agent holds a conversation and a model stream in memory for up to minutes; when the
machine is already short of memory the user's own work matters more. Available memory is read
from ``/proc/meminfo`` (``MemAvailable``) on Linux and from ``sysconf`` elsewhere; where neither
answers, the gate stays open.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["MEMINFO_PATH", "AvailableMemory", "available_memory_mb", "under_memory_pressure"]

MEMINFO_PATH = Path("/proc/meminfo")
_KIB_PER_MIB = 1024

AvailableMemory = Callable[[], float | None]  # MiB available now, or None when unknown


def _from_meminfo(path: Path) -> float | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            try:
                return int(fields[1]) / _KIB_PER_MIB
            except (IndexError, ValueError):
                return None
    return None


def _from_sysconf() -> float | None:
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    if pages <= 0 or page_size <= 0:
        return None
    return pages * page_size / (_KIB_PER_MIB * _KIB_PER_MIB)


def available_memory_mb(meminfo: Path = MEMINFO_PATH) -> float | None:
    """MiB of memory available to new work, or None when the system does not say."""
    found = _from_meminfo(meminfo)
    return found if found is not None else _from_sysconf()


def under_memory_pressure(min_available_mb: float, reader: AvailableMemory) -> bool:
    """True when the machine reports less than ``min_available_mb`` MiB available.

    A threshold of 0 or less turns the gate off; an unknown amount never counts as pressure.
    """
    if min_available_mb <= 0:
        return False
    try:
        available = reader()
    except Exception:  # a broken probe must not stop memory work
        return False
    return available is not None and available < min_available_mb
