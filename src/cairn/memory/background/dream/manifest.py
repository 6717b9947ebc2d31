"""Dream's operations manifest: the deletions the dreamer schedules, checked as a whole.

The dreamer cannot delete files itself. It lists deletions (and the merges and splits they
belong to) in ``.dream-operations.json``; :func:`validate_manifest` accepts the manifest only
when every rule holds, and :func:`apply_manifest` then applies it (the file is always removed):
each deleted file moves to the trash, unless it changed after the dreamer read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from cairn.debug_log import get_logger
from cairn.fsutil import read_regular_bytes
from cairn.memory.forget.trash import trash_files
from cairn.memory.paths import INDEX_FILE_NAME, PINNED_FOLDER
from cairn.memory.store.parse import ParseSkip, parse_memory_file, valid_name
from cairn.memory.store.scan import is_memory_name

__all__ = [
    "MANIFEST_VERSION",
    "MAX_MANIFEST_BYTES",
    "OPERATIONS_FILE_NAME",
    "AppliedManifest",
    "DreamOperations",
    "ManifestRejected",
    "apply_manifest",
    "memory_digests",
    "validate_manifest",
]

MAX_MANIFEST_BYTES = 1024 * 1024  # a larger operations manifest is rejected unread
OPERATIONS_FILE_NAME = ".dream-operations.json"
MANIFEST_VERSION = 1
_log = get_logger("MEMORY_DREAM")


class ManifestRejected(ValueError):
    """The operations manifest broke a rule; none of it is applied."""


@dataclass(frozen=True)
class DreamOperations:
    delete: list[str] = field(default_factory=list)  # relative POSIX paths
    deduped: int = 0  # dedupe sources
    split: int = 0  # split operations
    reasons: dict[str, str] = field(default_factory=dict)  # deleted path -> "merged into …"
    made: dict[str, str] = field(default_factory=dict)  # merge or split target -> what it holds


def _check_path(value: Any, root: Path, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ManifestRejected(f"{what}: a path must be a non-empty string")
    if "\\" in value or value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise ManifestRejected(f"{what} {value!r}: must be a relative POSIX path")
    parts = value.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ManifestRejected(f"{what} {value!r}: empty, '.' or '..' segments are not allowed")
    if not value.endswith(".md"):
        raise ManifestRejected(f"{what} {value!r}: only .md memory files")
    if parts[-1] == INDEX_FILE_NAME:
        raise ManifestRejected(f"{what} {value!r}: {INDEX_FILE_NAME} is generated, not a memory")
    if parts[0] == PINNED_FOLDER:
        raise ManifestRejected(f"{what} {value!r}: {PINNED_FOLDER}/ is protected")
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise ManifestRejected(f"{what} {value!r}: symlinks are not allowed")
    real_root = os.path.realpath(root)
    if not os.path.realpath(root / value).startswith(real_root + os.sep):
        raise ManifestRejected(f"{what} {value!r}: outside the memory folder")
    return str(PurePosixPath(value))


def _existing_memory(path: str, root: Path, what: str) -> None:
    target = root / path
    if not target.is_file():
        raise ManifestRejected(f"{what} {path!r}: no such memory file")
    if isinstance(parse_memory_file(target, root, "project"), ParseSkip):
        raise ManifestRejected(f"{what} {path!r}: not a valid memory file")


def _string_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestRejected(f"{what}: must be a list")
    return value


def validate_manifest(data: Any, root: Path) -> DreamOperations:
    """The deletions a manifest schedules, or :class:`ManifestRejected` on the first problem.

    Rules (reference §4.6): relative POSIX ``.md`` paths, no ``..``, never ``MEMORY.md`` or
    ``pinned/``, no symlink segments, inside the root, regular files; no duplicate deletes; a
    dedupe target exists, is a valid memory and is not deleted; every dedupe or split source is
    deleted, differs from its targets and belongs to one operation only; split targets (two or
    more) are unique, valid and survive.
    """
    if not isinstance(data, dict):
        raise ManifestRejected("the manifest must be a JSON object")
    if data.get("version", MANIFEST_VERSION) != MANIFEST_VERSION:
        raise ManifestRejected(f"unsupported manifest version {data.get('version')!r}")
    deletes = [_check_path(p, root, "delete") for p in _string_list(data.get("delete"), "delete")]
    if len(set(deletes)) != len(deletes):
        raise ManifestRejected("delete: a path is listed twice")
    for path in deletes:
        target = root / path
        if not target.is_file() or target.is_symlink():
            raise ManifestRejected(f"delete {path!r}: no such regular file")
    deleted = set(deletes)
    claimed: set[str] = set()
    deduped = split = 0
    reasons: dict[str, str] = {}
    made: dict[str, str] = {}
    for index, operation in enumerate(_string_list(data.get("operations"), "operations")):
        what = f"operations[{index}]"
        if not isinstance(operation, dict):
            raise ManifestRejected(f"{what}: must be an object")
        kind = operation.get("type")
        if kind == "dedupe":
            deduped += _check_dedupe(operation, root, deleted, claimed, what)
            for source in operation["sources"]:
                reasons[source] = f"merged into {operation['target']} by Dream"
            sources = ", ".join(operation["sources"])
            made[operation["target"]] = f"{sources} merged into this memory by Dream"
        elif kind == "split":
            _check_split(operation, root, deleted, claimed, what)
            split += 1
            reasons[operation["source"]] = f"split into {', '.join(operation['targets'])} by Dream"
            for target in operation["targets"]:
                made[target] = f"split out of {operation['source']} by Dream"
        else:
            raise ManifestRejected(f"{what}: unknown operation type {kind!r}")
    return DreamOperations(deletes, deduped, split, reasons, made)


def _claim(source: str, deleted: set[str], claimed: set[str], what: str) -> None:
    if source not in deleted:
        raise ManifestRejected(f"{what}: source {source!r} must also be in delete")
    if source in claimed:
        raise ManifestRejected(f"{what}: source {source!r} belongs to two operations")
    claimed.add(source)


def _check_dedupe(
    operation: Mapping[str, Any], root: Path, deleted: set[str], claimed: set[str], what: str
) -> int:
    target = _check_path(operation.get("target"), root, f"{what} target")
    if target in deleted:
        raise ManifestRejected(f"{what}: target {target!r} is deleted")
    _existing_memory(target, root, f"{what} target")
    sources = [
        _check_path(raw, root, f"{what} source")
        for raw in _string_list(operation.get("sources"), f"{what} sources")
    ]
    if not sources:
        raise ManifestRejected(f"{what}: a dedupe needs at least one source")
    for source in sources:
        if source == target:
            raise ManifestRejected(f"{what}: source {source!r} is also the target")
        _claim(source, deleted, claimed, what)
    return len(sources)


def _check_split(
    operation: Mapping[str, Any], root: Path, deleted: set[str], claimed: set[str], what: str
) -> None:
    source = _check_path(operation.get("source"), root, f"{what} source")
    targets = [
        _check_path(p, root, f"{what} target")
        for p in _string_list(operation.get("targets"), f"{what} targets")
    ]
    if len(targets) < 2:
        raise ManifestRejected(f"{what}: a split needs at least two targets")
    if len(set(targets)) != len(targets):
        raise ManifestRejected(f"{what}: a split target is listed twice")
    if source in targets:
        raise ManifestRejected(f"{what}: source {source!r} is also a target")
    for target in targets:
        if target in deleted:
            raise ManifestRejected(f"{what}: target {target!r} is deleted")
        _existing_memory(target, root, f"{what} target")
    _claim(source, deleted, claimed, what)


def _read_manifest(path: Path) -> Any:
    """The manifest's JSON, None when absent; :class:`ManifestRejected` when unreadable."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ManifestRejected("the manifest is larger than 1 MiB")
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        reason = error.strerror or error
        raise ManifestRejected(f"the manifest is not readable ({reason})") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ManifestRejected(f"the manifest is not valid JSON ({error})") from None


@dataclass(frozen=True)
class AppliedManifest:
    """What applying a manifest did."""

    operations: DreamOperations  # ``delete``: the files moved to the trash
    kept: list[str] = field(default_factory=list)  # deletions skipped: changed since read
    error: str | None = None  # why the whole manifest was rejected (nothing applied)


def memory_digests(root: Path) -> dict[str, str]:
    """SHA-256 of every memory file under ``root`` by relative path (no dot names, no symlinks,
    not ``MEMORY.md``, no name that is not UTF-8; FIFOs and devices are never opened)."""
    found: dict[str, str] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            path = Path(folder, name)
            if not is_memory_name(name) or not valid_name(name) or path.is_symlink():
                continue
            with contextlib.suppress(OSError):
                found[path.relative_to(root).as_posix()] = _digest(read_regular_bytes(path))
    return found


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _unchanged(root: Path, relative: str, expected: Mapping[str, str]) -> bool:
    """Whether the file still holds what the dreamer decided on (its digest when read)."""
    wanted = expected.get(relative)
    if wanted is None:
        return False  # appeared after the dreamer looked: not its to delete
    try:
        return _digest(read_regular_bytes(root / relative)) == wanted
    except OSError:
        return False


def apply_manifest(
    root: Path,
    *,
    expected: Mapping[str, str],
    now: float,
    session_id: str = "",
    originals: Mapping[str, str | None] | None = None,
) -> AppliedManifest:
    """Validate ``.dream-operations.json`` and move its deletions to the trash (root lock held);
    always remove the manifest. ``originals`` (the dreamer's other changes: relative path ->
    the text before, None for a new file) join the same trash folder, so ``cairn memory
    restore`` undoes the whole Dream.

    ``expected`` holds, by relative path, the digest of each file as the dreamer saw it (when it
    read it, else when the Dream started). A file whose content changed since (another process
    added a fact meanwhile) is kept, never deleted: its deletion was decided on older content.
    """
    path = root / OPERATIONS_FILE_NAME
    error: str | None = None
    try:
        data = _read_manifest(path)
        operations = validate_manifest(data, root) if data is not None else DreamOperations()
    except ManifestRejected as rejected:
        _log.warning(f"{path}: rejected, nothing deleted: {rejected}")
        operations, error = DreamOperations(), str(rejected)
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    doomed = [p for p in operations.delete if _unchanged(root, p, expected)]
    kept = [p for p in operations.delete if p not in doomed]
    for relative in kept:
        _log.warning(f"{root / relative}: changed after the dreamer read it; not deleted")
    folder = trash_files(
        root, "project", doomed, operation="dream", now=now, why=operations.reasons,
        session_id=session_id, originals=originals,
    )  # fmt: skip
    moved = [p for p in doomed if folder is not None and (folder / p).exists()]
    applied = DreamOperations(
        moved, operations.deduped, operations.split, operations.reasons, operations.made
    )
    return AppliedManifest(applied, kept, error)
