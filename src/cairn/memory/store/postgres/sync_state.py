"""What a mirror has synced, saved beside it as a snapshot plus a journal of changes.

A mirror's sync state (:class:`~cairn.memory.store.postgres.mirror.Shard`: the last ``seq``
pulled or pushed, each file's digest when synced and its stat signature) is what a new process
on this machine starts from. Saving it after every pull and every write used to rewrite the
whole state (2.6 MB of JSON at 10,000 memories, 0.2 s a write); now a save appends one entry
with the files that changed to a journal (``.<root>.sync.jnl``, framed and checked as the saved
index's journal is, :mod:`~cairn.memory.store.journal`), and the snapshot
(``.<root>.sync.json``) is rewritten only when the journal has grown or belongs to another
snapshot (another process on this machine wrote one).

Saves run under the mirror's local lock (a write section, a pull). Anything unreadable (a
damaged or truncated file, a state of another version or namespace) counts as "nothing synced":
the next pull writes every file again from the database, the source of truth. A torn last
journal entry (a process killed mid-append) loses that entry only: the state is then older than
the mirror, which costs pulling again what changed since.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes, read_regular_bytes
from cairn.memory.store.journal import Journal, new_generation

if TYPE_CHECKING:
    from cairn.memory.store.postgres.mirror import Shard

__all__ = ["FORMAT", "load_state", "save_state"]

FORMAT = 2  # 2: a snapshot line and a journal (1: one JSON object, no generation)
_PREFIX = b"cairn-mirror-sync\n"  # then the generation, a newline and the JSON
_JOURNAL_MAGIC = b"cairn-mirror-sync"
_COMPACT_ENTRIES = 512  # journal entries before the next save writes a snapshot
_COMPACT_BYTES = 2 * 1024 * 1024
_log = get_logger("MEMORY")

Signature = tuple[int, int, int]


def _journal(shard: Shard) -> Journal:
    return Journal(shard.sync_path.with_suffix(".jnl"), _JOURNAL_MAGIC)


def load_state(shard: Shard) -> None:
    """Fill ``shard`` with what this machine synced before (nothing when unreadable)."""
    try:
        data = read_regular_bytes(shard.sync_path)
    except OSError:
        return
    generation = ""
    if data.startswith(_PREFIX):
        head, _, body = data[len(_PREFIX) :].partition(b"\n")
        generation = head.decode("ascii", "replace")
    else:
        body = data  # format 1: the whole state as one JSON object
    try:
        state = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        _log.warning(f"{shard.sync_path}: unreadable sync state; pulling the mirror again")
        return
    if not isinstance(state, dict) or state.get("namespace") != shard.namespace:
        return
    seq, synced = state.get("seq"), state.get("synced")
    if not isinstance(seq, int) or not isinstance(synced, dict):
        return
    shard.seq = seq
    shard.synced = {str(k): str(v) for k, v in synced.items()}
    shard.stats = _stats(state.get("stats"), shard.synced)
    shard.generation = generation
    if generation:
        _replay(shard, generation)
    shard.touched.clear()


def _replay(shard: Shard, generation: str) -> None:
    read = _journal(shard).read(generation)
    if read is None:
        return
    if read.damaged:
        _log.warning(f"{shard.sync_path}: torn sync journal entry skipped")
    for payload in read.entries:
        try:
            entry = json.loads(payload)
            seq, changed, dropped = entry["seq"], entry["set"], entry["drop"]
        except (ValueError, KeyError, TypeError):
            break
        for key, (digest, signature) in changed.items():
            shard.synced[key] = digest
            if isinstance(signature, list) and len(signature) == 3:
                shard.stats[key] = (signature[0], signature[1], signature[2])
            else:
                shard.stats.pop(key, None)
        for key in dropped:
            shard.synced.pop(key, None)
            shard.stats.pop(key, None)
        shard.seq = seq
    shard.journal_entries = len(read.entries)
    shard.journal_bytes = read.size


def _stats(value: Any, synced: dict[str, str]) -> dict[str, Signature]:
    stats: dict[str, Signature] = {}
    if isinstance(value, dict):
        for key, stat in value.items():
            valid = isinstance(stat, list) and len(stat) == 3
            if key in synced and valid and all(isinstance(n, int) for n in stat):
                stats[str(key)] = (stat[0], stat[1], stat[2])
    return stats


def save_state(shard: Shard) -> None:
    """Save what changed since the last save (call with the mirror's local lock held)."""
    if not shard.touched and shard.seq == shard.saved_seq and shard.generation:
        return
    compact = (
        not shard.generation
        or shard.journal_entries >= _COMPACT_ENTRIES
        or shard.journal_bytes >= _COMPACT_BYTES
        or _snapshot_generation(shard) != shard.generation
    )
    if compact:
        _write_snapshot(shard)
    else:
        _append(shard)
    shard.touched.clear()
    shard.saved_seq = shard.seq


def _snapshot_generation(shard: Shard) -> str:
    try:
        with shard.sync_path.open("rb") as handle:
            head = handle.read(len(_PREFIX) + 64)
    except OSError:
        return ""
    if not head.startswith(_PREFIX):
        return ""
    return head[len(_PREFIX) :].partition(b"\n")[0].decode("ascii", "replace")


def _write_snapshot(shard: Shard) -> None:
    generation = new_generation()
    stats = {k: list(v) for k, v in shard.stats.items() if k in shard.synced}
    state = {"namespace": shard.namespace, "seq": shard.seq, "synced": shard.synced}
    body = json.dumps({**state, "stats": stats}, separators=(",", ":"), ensure_ascii=False)
    head = _PREFIX + generation.encode("ascii") + b"\n"
    atomic_write_bytes(shard.sync_path, head + body.encode("utf-8"), durable=False)
    _journal(shard).reset(generation)
    shard.generation = generation
    shard.journal_entries = shard.journal_bytes = 0


def _append(shard: Shard) -> None:
    changed: dict[str, list[Any]] = {}
    dropped: list[str] = []
    for key in sorted(shard.touched):
        digest = shard.synced.get(key)
        if digest is None:
            dropped.append(key)
        else:
            signature = shard.stats.get(key)
            changed[key] = [digest, list(signature) if signature is not None else None]
    entry = {"seq": shard.seq, "set": changed, "drop": dropped}
    payload = json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    shard.journal_bytes = _journal(shard).append([payload], shard.generation)
    shard.journal_entries += 1
