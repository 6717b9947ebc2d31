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

What was synced is kept in ``.sync.json`` beside the mirror, so a new process on this machine
starts from the mirror it left and pulls only what changed since.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.fsutil import atomic_write_bytes, atomic_write_json, read_regular_bytes
from cairn.memory.document import MemoryScope
from cairn.memory.paths import INDEX_FILE_NAME

if TYPE_CHECKING:
    import psycopg

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
    stats: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def sync_path(self) -> Path:
        return self.root.parent / f".{self.root.name}{SYNC_FILE_NAME}"

    def load(self) -> None:
        """What this machine synced before (nothing when the mirror is new or damaged)."""
        try:
            data = json.loads(read_regular_bytes(self.sync_path).decode("utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("namespace") == self.namespace:
            seq, synced = data.get("seq"), data.get("synced")
            if isinstance(seq, int) and isinstance(synced, dict):
                self.seq = seq
                self.synced = {str(k): str(v) for k, v in synced.items()}
                self.stats = _stats_from_json(data.get("stats"), self.synced)

    def save(self) -> None:
        stats = {k: list(v) for k, v in self.stats.items() if k in self.synced}
        data = {"namespace": self.namespace, "seq": self.seq, "synced": self.synced}
        atomic_write_json(self.sync_path, {**data, "stats": stats}, durable=False)


def _stats_from_json(value: Any, synced: dict[str, str]) -> dict[str, tuple[int, int, int]]:
    stats: dict[str, tuple[int, int, int]] = {}
    if isinstance(value, dict):
        for key, stat in value.items():
            valid = isinstance(stat, list) and len(stat) == 3
            if key in synced and valid and all(isinstance(n, int) for n in stat):
                stats[str(key)] = (stat[0], stat[1], stat[2])
    return stats


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def _trusted(signature: tuple[int, int, int]) -> bool:
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


def _walk(root: Path) -> Iterator[str]:
    """Relative paths of the regular files under ``root`` (dot folders skipped)."""
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                yield path.relative_to(root).as_posix()


def _trash_files(root: Path) -> Iterator[str]:
    trash = root / TRASH_NAME
    for folder, dirs, names in os.walk(trash):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                yield path.relative_to(trash).as_posix()


def _kept_files(root: Path) -> Iterator[str]:
    """The tombstones and version logs of ``root`` (temp files of atomic writes skipped)."""
    for name in KEPT_FILE_NAMES:
        path = root / name
        if path.is_file() and not path.is_symlink():
            yield name
    for kept in KEPT_FOLDERS:
        for folder, dirs, names in os.walk(root / kept):
            dirs.sort()
            for name in sorted(names):
                path = Path(folder, name)
                temp = name.startswith(".") and name.endswith(".tmp")
                if not temp and path.is_file() and not path.is_symlink():
                    yield path.relative_to(root).as_posix()


def shard_files(shard: Shard) -> dict[str, Path]:
    """Every file of ``shard`` the database holds, by key."""
    files: dict[str, Path] = {}
    if shard.root.is_dir():
        for relative in _walk(shard.root):
            name = relative.rsplit("/", 1)[-1]
            if relative == INDEX_FILE_NAME:
                files["index:"] = shard.root / relative
            elif name.endswith(_MEMORY_SUFFIX) and not name.startswith("."):
                files[f"doc:{relative}"] = shard.root / relative
        history = shard.root / HISTORY_NAME
        if history.is_file():
            files["history:"] = history
        for relative in _trash_files(shard.root):
            files[f"trash:{relative}"] = shard.root / TRASH_NAME / relative
        for relative in _kept_files(shard.root):
            files[f"file:{relative}"] = shard.root / relative
    if shard.state_dir is not None and shard.state_dir.is_dir():
        for entry in sorted(shard.state_dir.iterdir()):
            if entry.is_file() and entry.suffix == _STATE_SUFFIX and not entry.name.startswith("."):
                files[f"state:{entry.name}"] = entry
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
    cursor.execute(
        "SELECT max(seq) FROM cairn_memory_history WHERE namespace = %s AND scope = %s",
        (shard.namespace, shard.scope),
    )
    newest = cursor.fetchone()
    if newest is not None and newest[0] is not None and newest[0] > since:
        cursor.execute(
            "SELECT line FROM cairn_memory_history WHERE namespace = %s AND scope = %s "
            "ORDER BY line_no",
            (shard.namespace, shard.scope),
        )
        lines = b"".join(bytes(row[0]) for row in cursor.fetchall())
        yield "history:", lines or None, 0.0, newest[0]
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
            shard.synced.pop(key, None)
            shard.stats.pop(key, None)
        else:
            data = bytes(content)
            atomic_write_bytes(path, data, durable=False)
            if mtime:
                os.utime(path, (mtime, mtime))
            shard.synced[key] = _digest(data)
            _note_signature(shard, key, path)
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
    """(key -> content of files new or changed since synced, keys of files gone since)."""
    files = shard_files(shard)
    changed: dict[str, bytes] = {}
    for key, path in files.items():
        signature = _signature(path)
        if signature is not None and key in shard.synced and shard.stats.get(key) == signature:
            continue  # the very file whose digest was confirmed: not read again
        try:
            data = read_regular_bytes(path)
        except OSError:
            continue
        if shard.synced.get(key) != _digest(data):
            changed[key] = data
        elif signature is not None and _trusted(signature):
            shard.stats[key] = signature  # same content (a touch, a rewrite): confirmed
    gone = [key for key in shard.synced if key not in files]
    return changed, gone


def _note_signature(shard: Shard, key: str, path: Path) -> None:
    signature = _signature(path)
    if signature is None or not _trusted(signature):
        shard.stats.pop(key, None)
    else:
        shard.stats[key] = signature


def push(cursor: psycopg.Cursor[Any], shard: Shard, seq: int) -> list[str]:
    """Write what changed in the mirror into the rows, stamped ``seq`` (inside the write
    transaction); the keys written."""
    changed, gone = local_changes(shard)
    for key, data in changed.items():
        _upsert(cursor, shard, key, data, seq)
    for key in gone:
        _upsert(cursor, shard, key, None, seq)
    for key, data in changed.items():
        shard.synced[key] = _digest(data)
        path = path_of(shard, key)
        if path is not None:
            _note_signature(shard, key, path)
    for key in gone:
        shard.synced.pop(key, None)
        shard.stats.pop(key, None)
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
    """The audit trail as rows, one per line: new lines appended, a trimmed trail rewritten."""
    lines = data.splitlines(keepends=True)
    cursor.execute(
        "SELECT line_no, line FROM cairn_memory_history WHERE namespace = %s AND scope = %s "
        "ORDER BY line_no",
        (shard.namespace, shard.scope),
    )
    stored = [bytes(row[1]) for row in cursor.fetchall()]
    if stored == lines[: len(stored)]:
        start = len(stored)  # lines were appended: keep the rows, add the new ones
    else:
        cursor.execute(
            "DELETE FROM cairn_memory_history WHERE namespace = %s AND scope = %s",
            (shard.namespace, shard.scope),
        )
        start = 0
    for number, line in enumerate(lines[start:], start=start):
        cursor.execute(
            "INSERT INTO cairn_memory_history (namespace, scope, line_no, line, seq) "
            "VALUES (%s, %s, %s, %s, %s)",
            (shard.namespace, shard.scope, number, line, seq),
        )
    if start == len(lines) == len(stored):
        return
    # A row with the newest seq tells catching-up processes that the trail changed.
    cursor.execute(
        "UPDATE cairn_memory_history SET seq = %s WHERE namespace = %s AND scope = %s "
        "AND line_no = (SELECT max(line_no) FROM cairn_memory_history WHERE namespace = %s "
        "AND scope = %s)",
        (seq, shard.namespace, shard.scope, shard.namespace, shard.scope),
    )


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
