"""What the last check of a saved index against its files saw: ``find``'s records, kept beside
the index (``<scope>.seen``) so that the next check compares bytes instead of 100,000 stat keys.

A check by :func:`~cairn.memory.store.find_walk.find_walk` ends with the store's records equal
to what ``find`` printed. The records then equal those of the saved index as it was loaded
(snapshot ``generation`` plus its first ``entries`` journal entries), except for the memories
the process itself changed since loading (``changed``). That is what this file says: a later
check of an index loaded from the same snapshot, with at least as many journal entries, needs
to look from Python only at

- the records that differ between its ``find`` output and this one (none, usually: the two are
  compared as bytes first, then as sets of records),
- the memories named in ``changed``, and in the journal entries past ``entries``,
- the memories its own process changed since loading, and the symlinked ones (re-stat-ed
  always, as the inotify path does),

because every other memory's record in the index is the one this file holds, and ``find`` prints
the same record only for the same stat key. Anything off (another snapshot, a shorter or damaged
journal, another root, a damaged file) means a full comparison, after which the file is written
again. The file is a cache: losing it costs one full comparison.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.memory.store.check_file import read_check_file, write_check_file
from cairn.memory.store.find_walk import listing_relative, parse_record
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.memory.store.records import StatKey

__all__ = ["Seen", "listing_changes", "read_seen", "seen_path", "write_seen"]

_MAGIC = b"cairn-recall-seen\n"
_PLACES = 1024  # records out of place beyond which two outputs are compared as sets


class Seen(Value):
    root: str
    generation: str  # the snapshot the records were loaded from ...
    entries: int  # ... with this many of its journal's entries
    changed: frozenset[str]  # memories whose record may differ from the index so loaded
    listing: bytes  # find's output


def seen_path(cache_path: Path) -> Path:
    return cache_path.with_suffix(".seen")


def read_seen(cache_path: Path, root: str) -> Seen | None:
    """The file beside ``cache_path``, or None when there is none or it is not usable."""
    kept = read_check_file(seen_path(cache_path), _MAGIC, root)
    if kept is None or not isinstance(kept.payload, bytes):
        return None
    return Seen(root, kept.generation, kept.entries, kept.changed, kept.payload)


def write_seen(
    cache_path: Path, root: str, generation: str, entries: int, changed: Iterable[str],
    listing: bytes,
) -> None:  # fmt: skip
    """Replace the file beside ``cache_path`` (atomically; a failure only costs the next
    check a full comparison)."""
    write_check_file(seen_path(cache_path), _MAGIC, root, generation, entries, changed, listing)


def listing_changes(old: bytes, new: bytes) -> dict[str, StatKey | None] | None:
    """The plain files whose records differ between two outputs of ``find``: relative path ->
    the stat key in ``new``, or None when ``new`` has no record of it; None when a record of
    ``new`` does not parse.

    The records are compared place by place first (``find`` lists an unchanged folder in the
    same order): a record that is not where it was counts as gone there and new here, which
    comes to the same (a path has one record). When that finds many, a file added or removed
    having shifted the rest, they are compared as sets instead."""
    if old == new:
        return {}
    old_records, new_records = old.split(b"\0"), new.split(b"\0")
    size = min(len(old_records), len(new_records))
    places = [at for at in range(size) if old_records[at] != new_records[at]]
    if len(places) <= _PLACES:
        gone = [old_records[at] for at in places] + old_records[size:]
        added = [new_records[at] for at in places] + new_records[size:]
    else:
        old_set, new_set = set(old_records), set(new_records)
        gone, added = list(old_set - new_set), list(new_set - old_set)
    changes: dict[str, StatKey | None] = {}
    for record in gone:
        relative = listing_relative(record)
        if relative is not None:
            changes[relative] = None
    try:
        for record in added:
            if record[:1].isdigit():
                relative, key = parse_record(record)
                changes[relative] = key
    except ValueError:
        return None
    return changes
