"""The local mirror of a namespace: the database's memory as the files cairn reads.

Recall, the prompt section and the memory agents read memory files; with the PostgreSQL backend
they read a mirror folder that holds, file for file, what the database holds for one scope of one
namespace (a :class:`Shard`): the memories, ``MEMORY.md``, the audit trail ``.history.jsonl``,
the ``.trash/`` folders, the tombstones ``.forgotten.jsonl``, the version logs ``.versions/``
and, for the project scope, the state files (``meta.json``, ``extract-cursor.json`` …). The
database is the source of truth:

- :func:`pull` brings the mirror up to date: every row changed since the last pull (a larger
  ``seq``) is written to its file, a tombstone removes its file;
- :func:`push` writes what changed in the mirror since the last pull or push (found by comparing
  each file with the digest recorded when it was last synced) into the rows, stamped with the
  write's ``seq``; it runs in the write transaction of a locked section.

What was synced is kept beside the mirror (``.memory.sync.json`` and its journal, see
:mod:`~cairn.memory.store.postgres.sync_state`), so a new process on this machine starts from the
mirror it left and pulls only what changed since. A process that writes watches the mirror's
folders (inotify, :mod:`~cairn.memory.store.watch`), so a push reads the files that changed
instead of walking the whole mirror (:func:`local_changes`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cairn.fsutil import atomic_write_bytes, read_regular_bytes
from cairn.memory.document import MemoryScope
from cairn.memory.paths import INDEX_FILE_NAME
from cairn.memory.store.postgres.sync_state import load_state, save_state
from cairn.memory.store.watch import open_watcher

if TYPE_CHECKING:
    import psycopg

    from cairn.memory.store.watch import TreeWatcher

__all__ = ["SYNC_FILE_NAME", "Shard", "local_changes", "path_of", "pull", "push", "shard_files"]

SYNC_FILE_NAME = ".sync.json"
HISTORY_NAME = ".history.jsonl"
TRASH_NAME = ".trash"
# The other dot files cairn keeps in a memory root: the tombstones of forgotten facts, and the
# version logs of memories (one file each under .versions/). Stored in cairn_memory_files.
KEPT_FILE_NAMES = (".forgotten.jsonl",)
KEPT_FOLDERS = (".versions",)
_MEMORY_SUFFIX = ".md"
_STATE_SUFFIX = ".json"
_RACY_NS = 2_000_000_000  # a file modified this recently is compared by content, not by stat

Signature = tuple[int, int, int]  # (inode, size, mtime_ns)


@dataclass
class Shard:
    """One scope of one namespace and the folders that mirror it."""

    namespace: str
    scope: MemoryScope
    root: Path  # the memory root (memories, MEMORY.md, .history.jsonl, .trash/)
    state_dir: Path | None = None  # the project scope's state files; None for user memory
    seq: int = 0  # the last change pulled or pushed
    synced: dict[str, str] = field(default_factory=dict)  # file key -> sha256 when synced
    # file key -> (inode, size, mtime_ns) when its digest was last confirmed: a file whose
    # signature is unchanged is not read again (a commit would otherwise read the whole mirror)
    stats: dict[str, Signature] = field(default_factory=dict)
    # The saved state (see sync_state): its generation, its journal, what changed since
    generation: str = ""
    journal_entries: int = 0
    journal_bytes: int = 0
    saved_seq: int = 0
    touched: set[str] = field(default_factory=set)
    # Which files changed since the last look (see local_changes): the mirror's watcher,
    # and the keys it reported that are not settled yet (new, changed or gone)
    watcher: TreeWatcher | None = None
    dirty: set[str] = field(default_factory=set)

    @property
    def sync_path(self) -> Path:
        return self.root.parent / f".{self.root.name}{SYNC_FILE_NAME}"

    def load(self) -> None:
        """What this machine synced before (nothing when the mirror is new or damaged)."""
        load_state(self)
        self.saved_seq = self.seq

    def save(self) -> None:
        """Save what changed since the last save (the mirror's local lock held)."""
        save_state(self)

    def mark_synced(self, key: str, digest: str, signature: Signature | None) -> None:
        """``key``'s file holds what the database holds: its digest, and its signature when
        the file is old enough to trust it (see :func:`_trusted`)."""
        self.synced[key] = digest
        if signature is None or not _trusted(signature):
            self.stats.pop(key, None)
        else:
            self.stats[key] = signature
        self.touched.add(key)
        self.dirty.discard(key)

    def confirm(self, key: str, signature: Signature) -> None:
        """The file of ``key`` was read again and still is what was synced."""
        if _trusted(signature) and self.stats.get(key) != signature:
            self.stats[key] = signature
            self.touched.add(key)
        self.dirty.discard(key)

    def drop(self, key: str) -> None:
        """``key`` is in neither the mirror nor the database any more (or must be pulled
        again)."""
        if self.synced.pop(key, None) is not None:
            self.touched.add(key)
        self.stats.pop(key, None)
        self.dirty.discard(key)

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None


def _signature(path: Path) -> Signature | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def _trusted(signature: Signature) -> bool:
    """A signature whose mtime is a while ago: file times tick coarsely (a few ms), so a file
    changed in place again within the same tick and size would look unchanged (git's "racily
    clean" entries); such a file is read again next time instead."""
    return time.time_ns() - signature[2] > _RACY_NS


# --- the files of a shard ----------------------------------------------------------------------
#
# Keys name a file in one of five areas: "doc:<relpath>" (a memory, MEMORY.md included as
# "index:"), "history:", "trash:<relpath under .trash>", "state:<name>", and "file:<relpath>"
# for the other files cairn keeps in a root (KEPT_FILE_NAMES, and what is under KEPT_FOLDERS).


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class MirrorFile(NamedTuple):
    path: str
    signature: Signature  # as the walk found it


_STATE_PREFIX = "\0state/"  # how the watcher names the files of the state folder
_ROOT_DOT_FOLDERS = (TRASH_NAME, *KEPT_FOLDERS)  # the dot folders of a root that are synced


def key_of(relative: str) -> str | None:
    """The key of the file at ``relative`` in the root (``_STATE_PREFIX`` + name: in the state
    folder), or None for a file the database does not hold."""
    if relative.startswith(_STATE_PREFIX):
        name = relative[len(_STATE_PREFIX) :]
        state = name.endswith(_STATE_SUFFIX) and not name.startswith(".") and "/" not in name
        return f"state:{name}" if state else None
    if relative == INDEX_FILE_NAME:
        return "index:"
    if relative == HISTORY_NAME:
        return "history:"
    if relative in KEPT_FILE_NAMES:
        return f"file:{relative}"
    parts = relative.split("/")
    name = parts[-1]
    if parts[0] == TRASH_NAME and len(parts) > 1:
        return f"trash:{relative[len(TRASH_NAME) + 1 :]}"
    if parts[0] in KEPT_FOLDERS and len(parts) > 1:
        temp = name.startswith(".") and name.endswith(".tmp")  # an atomic write's temp file
        return None if temp else f"file:{relative}"
    if any(part.startswith(".") for part in parts):
        return None
    return f"doc:{relative}" if name.endswith(_MEMORY_SUFFIX) else None


def _scan(
    files: dict[str, MirrorFile], folder: str, prefix: str, watcher: TreeWatcher | None
) -> None:
    """Add the files under ``folder`` (one ``scandir`` per folder, one ``stat`` per file;
    symlinks are never followed), watching each folder before it is read."""
    if watcher is not None:
        watcher.watch(folder, prefix)
    try:
        listing = os.scandir(folder)
    except OSError:
        return
    with listing:
        entries = list(listing)
    for entry in entries:
        name = entry.name
        relative = prefix + name
        try:
            if entry.is_dir(follow_symlinks=False):
                synced = prefix.split("/", 1)[0] if prefix else name
                if not name.startswith(".") or synced in _ROOT_DOT_FOLDERS:
                    _scan(files, entry.path, f"{relative}/", watcher)
            elif entry.is_file(follow_symlinks=False):
                key = key_of(relative)
                if key is not None:
                    found = entry.stat(follow_symlinks=False)
                    files[key] = MirrorFile(entry.path, _signature_of(found))
        except OSError:
            continue  # gone meanwhile


def _signature_of(found: os.stat_result) -> Signature:
    return found.st_ino, found.st_size, found.st_mtime_ns


def shard_files(shard: Shard, watcher: TreeWatcher | None = None) -> dict[str, MirrorFile]:
    """Every file of ``shard`` the database holds, by key, with its stat signature (10,000
    memories: one ``stat`` each, tens of milliseconds); ``watcher`` watches every folder."""
    files: dict[str, MirrorFile] = {}
    _scan(files, str(shard.root), "", watcher)
    if shard.state_dir is not None:
        if watcher is not None:
            watcher.watch(str(shard.state_dir), _STATE_PREFIX)
        with contextlib.suppress(OSError), os.scandir(shard.state_dir) as listing:
            for entry in listing:
                key = key_of(_STATE_PREFIX + entry.name)
                with contextlib.suppress(OSError):
                    if key is not None and entry.is_file(follow_symlinks=False):
                        found = entry.stat(follow_symlinks=False)
                        files[key] = MirrorFile(entry.path, _signature_of(found))
    return files


def path_of(shard: Shard, key: str) -> Path | None:
    area, _, relative = key.partition(":")
    if ".." in relative.split("/"):
        return None  # a row that names a path outside the mirror is never written
    if area == "doc":
        return shard.root / relative
    if area == "index":
        return shard.root / INDEX_FILE_NAME
    if area == "history":
        return shard.root / HISTORY_NAME
    if area == "trash":
        return shard.root / TRASH_NAME / relative
    if area == "state" and shard.state_dir is not None and "/" not in relative:
        return shard.state_dir / relative
    if area == "file" and _kept(relative):
        return shard.root / relative
    return None


def _kept(relative: str) -> bool:
    """Whether a ``file:`` row names a file cairn keeps (never a memory, never elsewhere)."""
    first = relative.split("/", 1)[0]
    return relative in KEPT_FILE_NAMES or (first in KEPT_FOLDERS and "/" in relative)


# --- pull: database -> mirror --------------------------------------------------------------------


def _changed_rows(
    cursor: psycopg.Cursor[Any], shard: Shard, since: int
) -> Iterator[tuple[str, bytes | None, float, int]]:
    """(key, content or None for deleted, mtime, seq) of every row changed after ``since``."""
    args = (shard.namespace, shard.scope, since)
    cursor.execute(
        "SELECT path, content, mtime, seq FROM cairn_memory_docs "
        "WHERE namespace = %s AND scope = %s AND seq > %s",
        args,
    )
    for path, content, mtime, seq in cursor.fetchall():
        yield f"doc:{path}", content, mtime, seq
    cursor.execute(
        "SELECT content, seq FROM cairn_memory_indexes WHERE namespace = %s AND scope = %s "
        "AND seq > %s",
        args,
    )
    for content, seq in cursor.fetchall():
        yield "index:", content, 0.0, seq
    history = _changed_history(cursor, shard, since)
    if history is not None:
        yield "history:", history[0], 0.0, history[1]
    cursor.execute(
        "SELECT path, content, seq FROM cairn_memory_trash WHERE namespace = %s AND scope = %s "
        "AND seq > %s",
        args,
    )
    for path, content, seq in cursor.fetchall():
        yield f"trash:{path}", content, 0.0, seq
    cursor.execute(
        "SELECT path, content, seq FROM cairn_memory_files WHERE namespace = %s AND scope = %s "
        "AND seq > %s",
        args,
    )
    for path, content, seq in cursor.fetchall():
        yield f"file:{path}", content, 0.0, seq
    if shard.state_dir is not None:
        cursor.execute(
            "SELECT name, content, seq FROM cairn_memory_state WHERE namespace = %s AND seq > %s",
            (shard.namespace, since),
        )
        for name, content, seq in cursor.fetchall():
            yield f"state:{name}", content, 0.0, seq


def _changed_history(
    cursor: psycopg.Cursor[Any], shard: Shard, since: int
) -> tuple[bytes | None, int] | None:
    """The audit trail when it changed after ``since`` (its content, its newest seq): the lines
    appended to the one in the mirror when that is all that changed, else every line."""
    key = (shard.namespace, shard.scope)
    cursor.execute(
        "SELECT max(seq), count(*) FROM cairn_memory_history WHERE namespace = %s AND scope = %s",
        key,
    )
    found = cursor.fetchone()
    if found is None or found[0] is None or found[0] <= since:
        return None
    newest, count = int(found[0]), int(found[1])
    local = _synced_history(shard)
    if local is not None:
        known = len(local.splitlines())
        cursor.execute(
            "SELECT line_no, line FROM cairn_memory_history WHERE namespace = %s "
            "AND scope = %s AND (line_no >= %s OR seq > %s) ORDER BY line_no",
            (*key, known, since),
        )  # a line before ``known`` changed since: the trail was rewritten, not appended to
        rows = cursor.fetchall()
        appended = [row[0] for row in rows] == list(range(known, count))
        if appended and count == known + len(rows) and (not local or local.endswith(b"\n")):
            return local + b"".join(bytes(row[1]) for row in rows), newest
    cursor.execute(
        "SELECT line FROM cairn_memory_history WHERE namespace = %s AND scope = %s "
        "ORDER BY line_no",
        key,
    )
    lines = b"".join(bytes(row[0]) for row in cursor.fetchall())
    return lines or None, newest


def _synced_history(shard: Shard) -> bytes | None:
    """The mirror's audit trail if it is the one last synced (None: unknown, changed)."""
    digest = shard.synced.get("history:")
    if digest is None:
        return None
    try:
        data = read_regular_bytes(shard.root / HISTORY_NAME)
    except OSError:
        return None
    return data if _digest(data) == digest else None


def pull(cursor: psycopg.Cursor[Any], shard: Shard) -> list[str]:
    """Write every change the database has after ``shard.seq`` into the mirror; the keys.

    Call with the mirror's local lock held (inside or outside a write transaction).
    """
    changed: list[str] = []
    newest = shard.seq
    for key, content, mtime, seq in _changed_rows(cursor, shard, shard.seq):
        newest = max(newest, seq)
        path = path_of(shard, key)
        if path is None:
            continue
        if content is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            shard.drop(key)
        else:
            data = bytes(content)
            atomic_write_bytes(path, data, durable=False)
            if mtime:
                os.utime(path, (mtime, mtime))
            shard.mark_synced(key, _digest(data), _signature(path))
        changed.append(key)
    _remove_empty_trash_folders(shard)
    shard.seq = newest
    return changed


def _remove_empty_trash_folders(shard: Shard) -> None:
    trash = shard.root / TRASH_NAME
    if not trash.is_dir():
        return
    for folder in sorted((p for p in trash.rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only succeeds when empty


# --- push: mirror -> database --------------------------------------------------------------------


def local_changes(shard: Shard) -> tuple[dict[str, bytes], list[str]]:
    """(key -> content of files new or changed since synced, keys of files gone since).

    The first call walks the mirror and watches its folders (inotify); later calls look only
    at the files the watcher reported since (a write costs what it changed), and walk again
    when it cannot tell (an overflow, a folder moved, no inotify)."""
    files = _changed_files(shard)
    if files is None:
        shard.close()
        shard.watcher = open_watcher()
        found = shard_files(shard, shard.watcher)
        gone = [key for key in shard.synced if key not in found]
        files = dict(found)
        shard.dirty = set(gone)
    else:
        gone = [key for key, file in files.items() if file is None and key in shard.synced]
    changed: dict[str, bytes] = {}
    stats, synced = shard.stats, shard.synced
    for key, file in files.items():
        if file is None:
            if key not in synced:
                shard.dirty.discard(key)  # came and went
            continue
        if stats.get(key) == file.signature and key in synced:
            shard.dirty.discard(key)
            continue  # the very file whose digest was confirmed: not read again
        try:
            data = read_regular_bytes(file.path)
        except OSError:
            continue
        if synced.get(key) != _digest(data):
            changed[key] = data
            shard.dirty.add(key)  # until pushed: a failed section still finds it
        else:
            shard.confirm(key, file.signature)  # same content (a touch, a rewrite)
    return changed, gone


def _changed_files(shard: Shard) -> dict[str, MirrorFile | None] | None:
    """The files the watcher reported, and those not settled before (None: gone), or None
    when only a walk can tell."""
    watcher = shard.watcher
    if watcher is None:
        return None
    changes = watcher.drain()
    if changes.rescan:
        return None
    for relative in changes.files:
        key = key_of(relative)
        if key is not None:
            shard.dirty.add(key)
    files: dict[str, MirrorFile | None] = {}
    for key in shard.dirty:
        path = path_of(shard, key)
        found = None
        with contextlib.suppress(OSError):
            if path is not None:
                found = os.lstat(path)
        if found is not None and stat.S_ISREG(found.st_mode):
            files[key] = MirrorFile(str(path), _signature_of(found))
        else:
            files[key] = None
    return files


def push(cursor: psycopg.Cursor[Any], shard: Shard, seq: int) -> list[str]:
    """Write what changed in the mirror into the rows, stamped ``seq`` (inside the write
    transaction); the keys written."""
    changed, gone = local_changes(shard)
    for key, data in changed.items():
        _upsert(cursor, shard, key, data, seq)
    for key in gone:
        _upsert(cursor, shard, key, None, seq)
    for key, data in changed.items():
        path = path_of(shard, key)
        shard.mark_synced(key, _digest(data), _signature(path) if path is not None else None)
    for key in gone:
        shard.drop(key)
    if changed or gone:
        shard.seq = seq
    return [*changed, *gone]


def _upsert(
    cursor: psycopg.Cursor[Any], shard: Shard, key: str, data: bytes | None, seq: int
) -> None:
    area, _, relative = key.partition(":")
    ns, scope = shard.namespace, shard.scope
    if area == "doc":
        path = shard.root / relative
        mtime = path.stat().st_mtime if data is not None and path.exists() else 0.0
        title, description, kind = _fields(data)
        cursor.execute(
            "INSERT INTO cairn_memory_docs AS d (namespace, scope, path, content, sha256, title, "
            "description, type, mtime, seq) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (namespace, scope, path) DO UPDATE SET content = EXCLUDED.content, "
            "sha256 = EXCLUDED.sha256, title = EXCLUDED.title, "
            "description = EXCLUDED.description, type = EXCLUDED.type, mtime = EXCLUDED.mtime, "
            "seq = EXCLUDED.seq",
            (ns, scope, relative, data, _digest(data) if data is not None else None, title,
             description, kind, mtime, seq),
        )  # fmt: skip
    elif area == "index":
        cursor.execute(
            "INSERT INTO cairn_memory_indexes (namespace, scope, content, seq) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, scope) DO UPDATE SET "
            "content = EXCLUDED.content, seq = EXCLUDED.seq",
            (ns, scope, data or b"", seq),
        )
    elif area == "history":
        _push_history(cursor, shard, data or b"", seq)
    elif area == "trash":
        cursor.execute(
            "INSERT INTO cairn_memory_trash (namespace, scope, path, content, seq) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, scope, path) DO UPDATE SET "
            "content = EXCLUDED.content, seq = EXCLUDED.seq",
            (ns, scope, relative, data, seq),
        )
    elif area == "file":
        cursor.execute(
            "INSERT INTO cairn_memory_files (namespace, scope, path, content, seq) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, scope, path) DO UPDATE SET "
            "content = EXCLUDED.content, seq = EXCLUDED.seq",
            (ns, scope, relative, data, seq),
        )
    elif area == "state":
        cursor.execute(
            "INSERT INTO cairn_memory_state (namespace, name, content, seq) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, name) DO UPDATE SET "
            "content = EXCLUDED.content, seq = EXCLUDED.seq",
            (ns, relative, data, seq),
        )


def _push_history(cursor: psycopg.Cursor[Any], shard: Shard, data: bytes, seq: int) -> None:
    """The audit trail as rows, one per line: new lines appended, a trimmed trail rewritten.

    The rows hold what was last synced (pulled at the start of this section, under the
    namespace's lock): when the trail starts with exactly that, only the new lines are sent."""
    lines = data.splitlines(keepends=True)
    key = (shard.namespace, shard.scope)
    cursor.execute(
        "SELECT count(*) FROM cairn_memory_history WHERE namespace = %s AND scope = %s", key
    )
    found = cursor.fetchone()
    stored = int(found[0]) if found is not None else 0
    if not _starts_with_synced(shard, lines, stored):
        cursor.execute(
            "SELECT line FROM cairn_memory_history WHERE namespace = %s AND scope = %s "
            "ORDER BY line_no",
            key,
        )
        rows = [bytes(row[0]) for row in cursor.fetchall()]
        if rows != lines[:stored]:
            cursor.execute(
                "DELETE FROM cairn_memory_history WHERE namespace = %s AND scope = %s", key
            )
            stored = 0
    if stored == len(lines):
        return
    cursor.executemany(
        "INSERT INTO cairn_memory_history (namespace, scope, line_no, line, seq) "
        "VALUES (%s, %s, %s, %s, %s)",
        [(*key, number, line, seq) for number, line in enumerate(lines[stored:], start=stored)],
    )


def _starts_with_synced(shard: Shard, lines: list[bytes], stored: int) -> bool:
    """Whether the first ``stored`` of ``lines`` are the trail last synced (its digest)."""
    digest = shard.synced.get("history:")
    if digest is None:
        return stored == 0
    return stored <= len(lines) and _digest(b"".join(lines[:stored])) == digest


def _fields(data: bytes | None) -> tuple[str | None, str | None, str | None]:
    """A memory's title, description and type as the index reads them (None: not a memory)."""
    if data is None:
        return None, None, None
    from cairn.memory.store.parse import parse_memory_text

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, None, None
    parsed = parse_memory_text(
        text, path=Path("m.md"), relative_path="m.md", scope="project", mtime=0, size=len(data)
    )
    if hasattr(parsed, "title"):
        return parsed.title, parsed.description, parsed.type  # type: ignore[union-attr]
    return None, None, None
