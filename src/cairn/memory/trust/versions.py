"""Versions: every change cairn makes to a memory, kept, so it can be reviewed and undone.

Each memory has a version log, ``<root>/.versions/<relative path>.jsonl`` (a dot folder: never
read as memory), one JSON line per version, oldest first::

    {"v": 3, "time": "2026-03-02T10:41:07+00:00", "op": "dream", "session": "3f2a…",
     "why": "merged feedback/tabs-again.md into this memory", "sha256": "…", "content": "---\\n…"}

``content`` is the whole file after the change (``null`` once it was deleted: forgotten, merged
away, moved to the trash); ``op`` says who changed it (``extract``, ``dream``, ``remember``,
``agent``, ``forget``, ``restore``, ``import``) and ``why`` in words. A change made outside
cairn (an edit by hand, another tool) is noticed at cairn's next change of that memory and
recorded first as an ``outside`` version, and a memory cairn changes for the first time gets its
earlier content as an ``earlier`` version, so each diff in ``cairn memory log <memory>`` is
one real change. Storage stays simple for larger stores: one append-only file per memory,
whole contents (no deltas), the newest :data:`MAX_VERSIONS` kept and the file under
:data:`MAX_LOG_BYTES`. Writers hold the root's lock; with the PostgreSQL backend the logs travel
with the memory (``cairn_memory_files``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes, read_regular_bytes

__all__ = [
    "MAX_LOG_BYTES",
    "MAX_VERSIONS",
    "VERSIONS_FOLDER",
    "Change",
    "Version",
    "changes",
    "current_text",
    "read_versions",
    "record_version",
    "version_log_path",
]

VERSIONS_FOLDER = ".versions"
MAX_VERSIONS = 100  # newest versions kept per memory
MAX_LOG_BYTES = 8 * 1024 * 1024  # a log is trimmed (oldest versions first) to stay under this
MAX_WHY_CHARS = 300
_log = get_logger("MEMORY")


@dataclass(frozen=True)
class Version:
    number: int
    time: float  # seconds since the epoch
    operation: str
    content: str | None  # None: the memory was deleted by this change
    session_id: str = ""
    why: str = ""

    @property
    def deleted(self) -> bool:
        return self.content is None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "v": self.number,
            "time": _dt.datetime.fromtimestamp(self.time, _dt.UTC).isoformat(),
            "op": self.operation,
        }
        if self.session_id:
            data["session"] = self.session_id
        if self.why:
            data["why"] = self.why
        data["sha256"] = _digest(self.content)
        data["content"] = self.content
        return data

    @classmethod
    def from_json(cls, data: Any) -> Version | None:
        if not isinstance(data, Mapping):
            return None
        number, operation, content = data.get("v"), data.get("op"), data.get("content")
        try:
            when = _dt.datetime.fromisoformat(str(data.get("time"))).timestamp()
        except ValueError:
            return None
        if not isinstance(number, int) or not isinstance(operation, str):
            return None
        if content is not None and not isinstance(content, str):
            return None
        return cls(
            number,
            when,
            operation,
            content,
            str(data.get("session") or ""),
            str(data.get("why") or ""),
        )


def _digest(content: str | None) -> str | None:
    if content is None:
        return None
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def version_log_path(root: Path, relative: str) -> Path | None:
    """The version log of the memory at ``relative`` in ``root`` (None for a path that would
    lead out of the versions folder)."""
    parts = PurePosixPath(relative).parts
    if (
        not parts
        or PurePosixPath(relative).is_absolute()
        or any(p in ("", ".", "..") for p in parts)
    ):
        return None
    return root / VERSIONS_FOLDER / f"{relative}.jsonl"


def read_versions(root: Path, relative: str) -> list[Version]:
    """The versions of a memory, oldest first (a damaged line is skipped); never raises."""
    path = version_log_path(root, relative)
    if path is None:
        return []
    try:
        return _read(path)
    except OSError as error:
        _log.warning(f"{path}: not read ({error.strerror or error})")
        return []


def _read(path: Path) -> list[Version]:
    """The versions in the log at ``path`` ([] when there is none); OSError when unreadable."""
    try:
        raw = read_regular_bytes(path, limit=MAX_LOG_BYTES * 2)
    except FileNotFoundError:
        return []
    found: list[Version] = []
    for line in raw.splitlines():
        try:
            version = Version.from_json(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError):
            version = None
        if version is None:
            _log.warning(f"{path}: a damaged version line was skipped")
        else:
            found.append(version)
    return found


def _line(version: Version) -> bytes:
    return (json.dumps(version.to_json(), ensure_ascii=False) + "\n").encode("utf-8", "replace")


def record_version(
    root: Path,
    relative: str,
    content: str | None,
    *,
    previous: str | None,
    operation: str,
    now: float,
    session_id: str = "",
    why: str = "",
) -> Version | None:
    """Record that cairn changed the memory at ``relative`` from ``previous`` to ``content``
    (None: deleted). Call with the root's lock held. Returns the version recorded (None when
    nothing changed or the log cannot be written: a version is best effort, never a failure of
    the change itself)."""
    path = version_log_path(root, relative)
    if path is None or previous == content:
        return None
    try:
        return _record(path, content, previous, operation, now, session_id, why)
    except OSError as error:
        _log.warning(f"{path}: version not recorded ({error.strerror or error})")
        return None


def _record(
    path: Path,
    content: str | None,
    previous: str | None,
    operation: str,
    now: float,
    session_id: str,
    why: str,
) -> Version:
    versions = _read(path)
    last = versions[-1] if versions else None
    new: list[Version] = []
    number = last.number if last else 0
    if last is None and previous is not None:
        number += 1
        what = "as it was before cairn first changed it"
        new.append(Version(number, now, "earlier", previous, why=what))
    elif last is not None and _digest(last.content) != _digest(previous):
        number += 1
        what = "changed outside cairn (by hand or another tool)"
        new.append(Version(number, now, "outside", previous, why=what))
    why = " ".join(why.split())[:MAX_WHY_CHARS]
    version = Version(number + 1, now, operation, content, session_id, why)
    new.append(version)
    kept = [*versions, *new]
    size = os.stat(path).st_size if versions else 0
    if len(kept) > MAX_VERSIONS or size + sum(len(_line(v)) for v in new) > MAX_LOG_BYTES:
        _rewrite(path, kept)
    else:
        _append(path, b"".join(_line(v) for v in new))
    return version


def _append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _rewrite(path: Path, versions: list[Version]) -> None:
    """Keep the newest versions that fit (at least the newest one)."""
    kept = versions[-MAX_VERSIONS:]
    lines = [_line(v) for v in kept]
    while len(lines) > 1 and sum(map(len, lines)) > MAX_LOG_BYTES:
        lines.pop(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, b"".join(lines))


@dataclass(frozen=True)
class Change:
    """One version as ``cairn memory log <memory>`` shows it: what changed from the one before."""

    version: Version
    diff: tuple[str, ...]  # unified diff lines of the text (provenance left out)
    evidence: str = ""  # how the evidence changed, in words ("" when it did not)

    @property
    def summary(self) -> str:
        if self.version.deleted:
            return "deleted"
        first = self.version.number == 1 and self.version.operation != "earlier"
        return "created" if first and not self.diff else ""


def changes(versions: list[Version]) -> list[Change]:
    """Each version with its diff from the previous one, oldest first."""
    import difflib

    from cairn.memory.trust.provenance import provenance_of_text, without_provenance

    found: list[Change] = []
    before: str | None = None
    for version in versions:
        old = without_provenance(before or "").splitlines()
        new = without_provenance(version.content or "").splitlines()
        diff = tuple(
            difflib.unified_diff(
                old, new, f"v{version.number - 1}", f"v{version.number}", n=2, lineterm=""
            )
        ) if before is not None and version.content is not None else ()  # fmt: skip
        evidence = _evidence_change(
            provenance_of_text(before) if before else None,
            provenance_of_text(version.content) if version.content else None,
        )
        found.append(Change(version, diff, evidence))
        before = version.content if version.content is not None else before
    return found


def _evidence_change(before: Any, after: Any) -> str:
    old = {e.path: e for e in (before.evidence if before else ())}
    new = {e.path: e for e in (after.evidence if after else ())}
    parts = [f"+{path}" for path in new if path not in old]
    parts += [f"-{path}" for path in old if path not in new]
    parts += [f"{path} re-recorded" for path in new if path in old and new[path] != old[path]]
    return "evidence: " + ", ".join(parts) if parts else ""


def current_text(path: Path) -> str | None:
    """A memory file's text now (None when it does not exist or cannot be read)."""
    try:
        return read_regular_bytes(path, limit=2 * 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
