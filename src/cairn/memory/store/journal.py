"""Append-only journals beside a saved snapshot: what changed since, one framed entry each.

A persisted index (the lexical index, the vectors) is a *snapshot* file plus a *journal*: a write
that changes one memory appends one entry to the journal instead of rewriting the snapshot, so it
costs what it changes. Now and then the journal is folded into a new snapshot (*compaction*, in
the background for a large snapshot), and the journal starts over.

Both files carry the snapshot's *generation* (16 hex digits, new at every snapshot): a journal
whose generation is not its snapshot's belongs to an older snapshot, whose entries the newer one
already holds, and is ignored (the first append resets it). An entry is framed as a 4-byte
length, a CRC-32 of the payload and the payload, and appended with one ``write`` on an
``O_APPEND`` descriptor while holding the index's lock file, so entries of concurrent processes
never interleave. A process killed mid-append leaves a torn last entry: the reader stops at the
first entry that does not check out, says so once, and what it could not read is found again by
the store's stat check (the memory files are the truth; the index only saves re-reading them).

Compaction swaps files in an order that is safe at every point: the new snapshot's companion
files first (new names), then the snapshot (renamed over the old one), then the journal (reset
to the new generation, keeping entries appended while the compaction ran). See
:mod:`~cairn.memory.store.cache` for the lexical index's snapshot.

Files renamed into place are written to temp files named for their writer's PID
(:func:`temp_path`); a writer killed before the rename leaves one, which the next load or save
of the index removes (:func:`sweep_temp_files`).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger
from cairn.values import Value

if TYPE_CHECKING:
    from filelock import FileLock

__all__ = [
    "GENERATION_BYTES",
    "Journal",
    "JournalRead",
    "frame",
    "index_lock",
    "new_generation",
    "sweep_temp_files",
    "temp_path",
]

GENERATION_BYTES = 16  # hex digits of a snapshot generation
_HEADER_SUFFIX = b"-journal\n"  # a journal starts with <magic>-journal\n<generation>\n
_LENGTH_BYTES = 4
_CRC_BYTES = 4
_MAX_ENTRY_BYTES = 64 * 1024 * 1024  # a length above this is damage, not an entry
_LOCK_TIMEOUT_SECONDS = 60.0  # appends and swaps hold the lock for milliseconds
STALE_INDEX_TEMP_SECONDS = 600.0  # an index temp file this old is a dead writer's, whatever
# its name says (a root's memory temp files: locks.STALE_TEMP_SECONDS, under the root's lock)
_WRITER_PID = re.compile(r"\.pid([0-9]{1,7})\.tmp$")  # temp_path's names
_log = get_logger("MEMORY")


def new_generation() -> str:
    return secrets.token_hex(GENERATION_BYTES // 2)


def index_lock(path: Path) -> FileLock:
    """The lock of a persisted index ``path`` (held to append, to swap a snapshot in)."""
    from filelock import FileLock  # off the start path: only a writer locks

    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path.with_name(f".{path.name}.lock")), thread_local=False)


def frame(payload: bytes) -> bytes:
    """One journal entry: its length, its CRC-32, the payload."""
    return (
        len(payload).to_bytes(_LENGTH_BYTES, "big")
        + zlib.crc32(payload).to_bytes(_CRC_BYTES, "big")
        + payload
    )


class JournalRead(Value):
    entries: list[bytes]  # payloads, in order
    end: int  # offset just past the last good entry
    size: int  # the file's size when read
    damaged: bool  # bytes past ``end`` that are not a whole entry (a torn or damaged tail)


class Journal:
    """The journal file of one persisted index (``magic`` names its kind)."""

    def __init__(self, path: Path, magic: bytes) -> None:
        self.path = path
        self.magic = magic

    def header(self, generation: str) -> bytes:
        return self.magic + _HEADER_SUFFIX + generation.encode("ascii") + b"\n"

    def read(self, generation: str, *, start: int = 0) -> JournalRead | None:
        """The entries of the journal if it belongs to ``generation`` (else None); from byte
        ``start`` (an earlier read's ``end``) when given."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return JournalRead([], 0, 0, False)
        except OSError as error:
            _log.warning(f"recall index journal {self.path} unreadable ({error})")
            return None
        header = self.header(generation)
        if not data.startswith(header):
            return None
        entries, end = _entries(data, max(start, len(header)))
        return JournalRead(entries, end, len(data), end != len(data))

    def append(self, payloads: Sequence[bytes], generation: str) -> int:
        """Append ``payloads`` (call with :func:`index_lock` held); a journal of another
        generation is reset first. Returns the journal's size afterwards."""
        header = self.header(generation)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if os.pread(fd, len(header), 0) != header:
                os.ftruncate(fd, 0)
                os.write(fd, header)
            os.write(fd, b"".join(frame(payload) for payload in payloads))
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def reset(self, generation: str, tail: bytes = b"") -> None:
        """Start the journal over for ``generation``, keeping ``tail`` (whole framed entries)."""
        from cairn.fsutil import atomic_write_bytes

        atomic_write_bytes(self.path, self.header(generation) + tail, durable=False)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


def _entries(data: bytes, offset: int) -> tuple[list[bytes], int]:
    entries: list[bytes] = []
    view = memoryview(data)
    while offset + _LENGTH_BYTES + _CRC_BYTES <= len(data):
        length = int.from_bytes(view[offset : offset + _LENGTH_BYTES], "big")
        crc = int.from_bytes(view[offset + _LENGTH_BYTES : offset + 8], "big")
        start = offset + _LENGTH_BYTES + _CRC_BYTES
        if length > _MAX_ENTRY_BYTES or start + length > len(data):
            break
        payload = bytes(view[start : start + length])
        if zlib.crc32(payload) != crc:
            break
        entries.append(payload)
        offset = start + length
    return entries, offset


def read_generation(path: Path, prefix: bytes) -> str | None:
    """The generation written right after ``prefix`` at the start of ``path``, or None."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(prefix) + GENERATION_BYTES)
    except OSError:
        return None
    if not head.startswith(prefix) or len(head) != len(prefix) + GENERATION_BYTES:
        return None
    generation = head[len(prefix) :]
    try:
        text = generation.decode("ascii")
        int(text, 16)
    except ValueError:
        return None
    return text


def temp_path(path: Path, tag: str = "") -> Path:
    """The temp file a write of ``path`` goes through before it is renamed over it:
    ``.<name>[.<tag>].pid<pid>.tmp``, the writer's PID in its name, so that
    :func:`sweep_temp_files` can tell a dead writer's leftover from a live writer's file."""
    middle = f".{tag}" if tag else ""
    return path.with_name(f".{path.name}{middle}.pid{os.getpid()}.tmp")


def sweep_temp_files(folder: Path, *, min_age: float = STALE_INDEX_TEMP_SECONDS) -> list[Path]:
    """Remove the temp files that writers killed mid-write (``kill -9``, a daemon compaction
    thread ended by the interpreter's exit) left in ``folder``: one whose name carries the PID
    of a process that no longer exists (:func:`temp_path`) at once, any other one (a live PID,
    or a name without one: older versions, the journal's reset) once older than ``min_age``
    seconds (a writer takes milliseconds to seconds). Returns what it removed."""
    import time

    removed: list[Path] = []
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(folder) as listing:
        for entry in listing:
            name = entry.name
            if not (name.startswith(".") and name.endswith(".tmp")):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    continue
                found = _WRITER_PID.search(name)
                dead_writer = found is not None and not _alive(int(found[1]))
                if not dead_writer and now - entry.stat(follow_symlinks=False).st_mtime < min_age:
                    continue
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    for path in removed:
        _log.debug(f"{path}: removed a temp file left by an interrupted index write")
    return removed


def _alive(pid: int) -> bool:
    from cairn.memory.store.locks import pid_alive  # (filelock: only when a temp file is found)

    return pid == os.getpid() or pid_alive(pid)


def iter_framed(payloads: Sequence[bytes]) -> Iterator[bytes]:
    for payload in payloads:
        yield frame(payload)
