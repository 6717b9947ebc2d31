"""Moving a memory between backends, and out to files people edit and back in.

- :func:`export_memory` writes the reference Markdown layout from either backend:
  ``<folder>/project/`` and ``<folder>/user/``, each with its memory files (in their type
  folders) and its ``MEMORY.md``, modification times kept;
- :func:`import_memory` makes the memory match such a folder in one write section: new and
  changed memories are written, memories missing from the folder go to the trash (restorable),
  files that are not valid memories are skipped with a reason;
- :func:`migrate` copies a whole memory (memories, indexes, audit trail, trash and state files)
  from the file backend to PostgreSQL or back, byte for byte, into a target that holds no
  memory yet.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cairn.config.settings import Settings
from cairn.fsutil import read_regular_bytes
from cairn.memory.document import MemoryScope
from cairn.memory.paths import INDEX_FILE_NAME, MemoryRoots, memory_roots
from cairn.memory.store.scan import is_memory_name

__all__ = [
    "TransferError",
    "TransferReport",
    "copy_tree",
    "export_memory",
    "import_memory",
    "memory_files",
    "migrate",
]

_STATE_SUFFIX = ".json"  # the state folder's files that belong to the memory (meta, cursor ...)
_NOT_COPIED_SUFFIXES = (".lock", ".tmp")  # locks and the temp files of atomic writes


class TransferError(RuntimeError):
    """An export, import or migration that would lose or mix memories; nothing was changed."""


@dataclass
class TransferReport:
    written: list[str] = field(default_factory=list)  # "scope:relpath"
    removed: list[str] = field(default_factory=list)  # moved to the trash (import)
    skipped: list[str] = field(default_factory=list)  # "scope:relpath: why"
    files: int = 0  # every file copied (migrate: the audit trail, trash and state too)

    def summary(self, verb: str) -> str:
        parts = [f"{len(self.written)} {_memories(len(self.written))} {verb}"]
        if self.removed:
            parts.append(f"{len(self.removed)} moved to the trash")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        return ", ".join(parts)


def _memories(count: int) -> str:
    return "memory" if count == 1 else "memories"


def memory_files(root: Path) -> list[str]:
    """Relative paths of the memory files under ``root`` (dot folders and names skipped)."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder, name)
            if is_memory_name(name) and path.is_file() and not path.is_symlink():
                found.append(path.relative_to(root).as_posix())
    return found


def copy_tree(source: Path, target: Path) -> list[str]:
    """Every regular file under ``source`` (dot files too, never locks or temp files) copied to
    ``target`` with its modification time; the relative paths copied."""
    copied: list[str] = []
    for folder, dirs, names in os.walk(source):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file() or name.endswith(_NOT_COPIED_SUFFIXES):
                continue
            if name.startswith(".") and name.endswith((".sync.json", ".sync.jnl")):
                continue  # a mirror's own bookkeeping
            relative = path.relative_to(source)
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
            copied.append(relative.as_posix())
    return copied


def _copy_state(source: Path, target: Path) -> list[str]:
    """The state folder's own files (``meta.json``, ``extract-cursor.json`` …), not its caches."""
    copied: list[str] = []
    if not source.is_dir():
        return copied
    for entry in sorted(source.iterdir()):
        if entry.is_file() and entry.suffix == _STATE_SUFFIX and not entry.name.startswith("."):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(entry, target / entry.name)
            copied.append(entry.name)
    return copied


# --- export and import ---------------------------------------------------------------------------


def export_memory(roots: Mapping[MemoryScope, Path], folder: Path) -> TransferReport:
    """Write every memory and ``MEMORY.md`` of ``roots`` under ``folder/<scope>/``."""
    if folder.exists() and any(folder.iterdir()):
        raise TransferError(f"{folder} is not empty: export into a new or empty folder")
    report = TransferReport()
    for scope, root in roots.items():
        target = folder / scope
        target.mkdir(parents=True, exist_ok=True)
        for relative in [*memory_files(root), INDEX_FILE_NAME]:
            source = root / relative
            if not source.is_file():
                continue
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
            if relative != INDEX_FILE_NAME:
                report.written.append(f"{scope}:{relative}")
            report.files += 1
    return report


def import_memory(roots: Mapping[MemoryScope, Path], folder: Path, *, now: float) -> TransferReport:
    """Make the memory of each ``folder/<scope>/`` present match it (call with the roots'
    locks held: one write section); what was written, trashed and skipped."""
    from cairn.memory.forget.trash import trash_files
    from cairn.memory.store.parse import memory_file_problem
    from cairn.memory.trust.versions import record_version

    report = TransferReport()
    present = [(s, r) for s, r in roots.items() if (folder / s).is_dir()]
    if not present:
        names = " or ".join(f"{folder / scope}" for scope in roots)
        raise TransferError(f"nothing to import: no {names} (see `cairn memory export`)")
    for scope, root in present:
        source = folder / scope
        wanted = memory_files(source)
        for relative in wanted:
            data = read_regular_bytes(source / relative)
            try:
                problem = memory_file_problem(data.decode("utf-8"))
            except UnicodeDecodeError:
                problem = "not UTF-8 text"
            if problem is not None:
                report.skipped.append(f"{scope}:{relative}: {problem}")
                continue
            target = root / relative
            previous = read_regular_bytes(target) if target.is_file() else None
            if previous == data:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / relative, target)
            report.written.append(f"{scope}:{relative}")
            record_version(
                root, relative, data.decode("utf-8"), operation="import", now=now,
                previous=None if previous is None else previous.decode("utf-8", "replace"),
                why=f"cairn memory import {folder}",
            )  # fmt: skip
        gone = sorted(set(memory_files(root)) - set(wanted)) if root.is_dir() else []
        reasons = dict.fromkeys(gone, f"missing from {folder} (cairn memory import)")
        removed = trash_files(root, scope, gone, operation="import", now=now, why=reasons)
        if gone and removed is not None:
            report.removed += [f"{scope}:{relative}" for relative in gone]
    return report


# --- migrate -------------------------------------------------------------------------------------


def migrate(
    settings: Settings,
    project_root: Path,
    *,
    to: Literal["postgres", "files"],
    environ: Mapping[str, str] = os.environ,
    tenant: str | None = None,
) -> TransferReport:
    """Copy the project's memory from one backend to the other (see the module docstring);
    a daemon ``tenant``'s memory with ``tenant``."""
    from cairn.memory.store.backend import open_backend, tenant_environ
    from cairn.memory.store.locks import hold_roots
    from cairn.memory.store.postgres.backend import PostgresBackend

    database_settings = settings.model_copy(deep=True)
    database_settings.memory.backend = "postgres"
    database = open_backend(database_settings, project_root, environ=environ, tenant=tenant)
    files_environ = environ if tenant is None else tenant_environ(environ, tenant)
    files = memory_roots(project_root, environ=files_environ)
    try:
        assert isinstance(database, PostgresBackend)
        database.pull_now()  # the database as it is now (an unreachable one is an error here)
        source, target = (files, database.roots) if to == "postgres" else (database.roots, files)
        scopes = _scopes(database.roots, files)
        report = TransferReport()
        target_roots = [_root(target, scope) for scope in scopes]
        with hold_roots(target_roots):  # with postgres as the target: one transaction
            for scope in scopes:  # checked under the lock: no writer slips in before the copy
                held = memory_files(_root(target, scope))
                if held:
                    raise TransferError(
                        f"the {to} memory already holds {len(held)} {scope} "
                        f"{_memories(len(held))}: migrate only into an empty memory (export, "
                        "and import, to merge)"
                    )
            for scope in scopes:
                copied = copy_tree(_root(source, scope), _root(target, scope))
                report.files += len(copied)
                report.written += [f"{scope}:{path}" for path in memory_files(_root(target, scope))]
            report.files += len(_copy_state(source.state_dir, target.state_dir))
    finally:
        database.close()
    return report


def _scopes(database: MemoryRoots, files: MemoryRoots) -> list[MemoryScope]:
    """The scopes that live in the database (user memory only with a user namespace)."""
    scopes: list[MemoryScope] = ["project"]
    if os.path.abspath(database.user) != os.path.abspath(files.user):
        scopes.append("user")
    return scopes


def _root(roots: MemoryRoots, scope: MemoryScope) -> Path:
    if scope == "user":
        return roots.user
    assert roots.project is not None
    return roots.project
