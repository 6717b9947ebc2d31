"""The trash: forgotten memories (and Dream's deletions) move to a trash folder, and the last
such change comes back.

Applying a forget plan never deletes anything: a removed file, or the original of a multi-entry
file whose other entries are rewritten in place, moves to ``<root>/.trash/<id>/<relpath>`` beside
a ``manifest.json``, and each forgotten entry leaves a tombstone
(:mod:`~cairn.memory.forget.tombstones`); :func:`trash_files` moves whole files Dream deletes
(no tombstone: a merge is not a forget), and :func:`trash_forgotten` a memory the session's
agent wrote past the memory guard stating a forgotten fact again. :func:`restore_last_forget`
puts the most recent one back and removes its tombstones, refusing when a file it would restore
exists again (or, for a rewritten file, was changed since).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes, atomic_write_json, read_regular_bytes
from cairn.memory.document import MemoryScope
from cairn.memory.forget.selection import ForgetCandidate, ForgetPlan, normalize_summary
from cairn.memory.forget.tombstones import (
    TOMBSTONES_FILE_NAME,
    ForgottenFacts,
    Statement,
    Tombstone,
    add_tombstones,
    read_tombstones,
    remove_tombstones,
)
from cairn.memory.store.entries import MemoryEntry, parse_entries, render_entries
from cairn.memory.trust.versions import record_version
from cairn.vocabulary.events import MemoryChanged

__all__ = [
    "MANIFEST_NAME",
    "TRASH_FOLDER",
    "ForgetReport",
    "TrashedWrite",
    "apply_forget_plan",
    "restore_last_forget",
    "trash_files",
    "trash_forgotten",
]

TRASH_FOLDER = ".trash"  # under each memory root; never scanned as memory
MANIFEST_NAME = "manifest.json"
_MANIFEST_VERSION = 1
_FRONT_MATTER = re.compile(
    r"\A(?:\ufeff)?---[ \t]*\r?\n(?:.*?\r?\n)?---[ \t]*(?:\r?\n|\Z)", re.DOTALL
)
_log = get_logger("MEMORY_FORGET")


@dataclass(slots=True)
class ForgetReport:
    """What a forget or a restore did; ``ok`` is False when it refused or failed."""

    ok: bool
    message: str
    entries: int = 0
    files: list[str] = field(default_factory=list)  # "scope:relpath" labels
    removed: list[str] = field(default_factory=list)  # labels a restore removed (Dream's new)
    trash: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    change: MemoryChanged | None = None  # what front ends show (set by the manager)


def _trash_id(now: float) -> str:
    return _dt.datetime.fromtimestamp(now, _dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


def _unique_trash_id(roots: Mapping[MemoryScope, Path], now: float) -> str:
    base = _trash_id(now)
    candidate, n = base, 0
    while any((root / TRASH_FOLDER / candidate).exists() for root in roots.values()):
        n += 1
        candidate = f"{base}-{n:03d}"
    return candidate


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _split_front_matter(text: str) -> tuple[str, str] | None:
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None
    return match.group(0), text[match.end() :]


def _same_entry(entry: MemoryEntry, candidate: ForgetCandidate) -> bool:
    return normalize_summary(entry.summary) == normalize_summary(candidate.summary)


def _match_entries(
    entries: Sequence[MemoryEntry], candidates: Sequence[ForgetCandidate]
) -> tuple[set[int], list[ForgetCandidate]]:
    """Indexes of the entries to drop and the candidates they matched.

    An entry is matched at its listed index when the summary there is unchanged, else by the
    first unmatched entry with the same summary (the file may have changed since the listing).
    """
    drop: set[int] = set()
    removed: list[ForgetCandidate] = []
    pending: list[ForgetCandidate] = []
    for candidate in candidates:
        index = candidate.entry_index
        at_index = index is not None and index < len(entries) and index not in drop
        if at_index and index is not None and _same_entry(entries[index], candidate):
            drop.add(index)
            removed.append(candidate)
        else:
            pending.append(candidate)
    for candidate in pending:
        for index, entry in enumerate(entries):
            if index not in drop and _same_entry(entry, candidate):
                drop.add(index)
                removed.append(candidate)
                break
    return drop, removed


@dataclass(slots=True)
class _Outcome:
    relative_path: str
    action: Literal["deleted", "rewritten", "created"]
    removed: list[ForgetCandidate]
    rewritten_sha256: str | None = None  # "rewritten" and "created": the content it left
    previous: str | None = None  # the text before (for the version log; not in the manifest)
    current: str | None = None  # the text after ("rewritten")
    why: str = ""  # Dream's reason for a deletion ("merged into …")

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "relative_path": self.relative_path,
            "action": self.action,
            "entries": [c.summary for c in self.removed],
        }
        if self.rewritten_sha256 is not None:
            record["rewritten_sha256"] = self.rewritten_sha256
        if self.why:
            record["why"] = self.why
        return record


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _read_text(path: Path) -> str | None:
    try:
        return _text(read_regular_bytes(path))
    except OSError:
        return None


def _move(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)


def _forget_file(
    path: Path, relative_path: str, candidates: Sequence[ForgetCandidate], trash_dir: Path
) -> _Outcome | None:
    """Move the file (or its chosen entries) to ``trash_dir``; None when nothing matched."""
    saved = trash_dir / relative_path
    data = path.read_bytes()
    if any(c.entry_index is None for c in candidates):
        _move(path, saved)
        return _Outcome(relative_path, "deleted", list(candidates), previous=_text(data))
    split = _split_front_matter(data.decode("utf-8"))
    if split is None:  # no longer a memory file: forget it whole, as the reference does
        _move(path, saved)
        return _Outcome(relative_path, "deleted", list(candidates), previous=_text(data))
    head, body = split
    entries = parse_entries(body)
    drop, removed = _match_entries(entries, candidates)
    if not removed:
        return None
    kept = [entry for index, entry in enumerate(entries) if index not in drop]
    if not kept:
        _move(path, saved)
        return _Outcome(relative_path, "deleted", removed, previous=_text(data))
    rewritten = f"{head.rstrip()}\n\n{render_entries(kept)}\n".encode()
    atomic_write_bytes(saved, data)
    atomic_write_bytes(path, rewritten)
    return _Outcome(
        relative_path, "rewritten", removed, _sha256(rewritten), _text(data), _text(rewritten)
    )


def _group_by_file(
    matches: Sequence[ForgetCandidate],
) -> dict[tuple[MemoryScope, str], list[ForgetCandidate]]:
    groups: dict[tuple[MemoryScope, str], list[ForgetCandidate]] = {}
    for candidate in matches:
        groups.setdefault((candidate.scope, candidate.relative_path), []).append(candidate)
    return groups


def apply_forget_plan(
    plan: ForgetPlan,
    roots: Mapping[MemoryScope, Path],
    *,
    now: float,
    session_id: str = "",
    changed: Collection[str] = (),
) -> ForgetReport:
    """Move the plan's entries to the trash and leave a tombstone for each (so Extract and
    Dream never learn them again). Per-file failures are reported and skipped, and so is a
    whole file the plan would remove whose label is in ``changed`` (rewritten since the plan
    read it: the plan no longer says what it holds)."""
    if not plan.matches:
        return ForgetReport(False, f"No memory entries matched: {plan.query}")
    trash_id = _unique_trash_id(roots, now)
    outcomes: dict[MemoryScope, list[_Outcome]] = {}
    report = ForgetReport(True, "")
    for (scope, relative_path), candidates in _group_by_file(plan.matches).items():
        root = roots.get(scope)
        if root is None:
            report.problems.append(f"{scope}:{relative_path}: that memory root is not available")
            continue
        if f"{scope}:{relative_path}" in changed and any(c.entry_index is None for c in candidates):
            report.problems.append(f"{scope}:{relative_path}: changed since the plan; not removed")
            continue
        try:
            outcome = _forget_file(
                root / relative_path, relative_path, candidates, root / TRASH_FOLDER / trash_id
            )
        except (OSError, UnicodeDecodeError) as exc:
            _log.warning(f"forget skipped {scope}:{relative_path}: {exc}")
            report.problems.append(f"{scope}:{relative_path}: {exc}")
            continue
        if outcome is None:
            report.problems.append(f"{scope}:{relative_path}: the entries changed; nothing removed")
            continue
        outcomes.setdefault(scope, []).append(outcome)
        report.files.append(f"{scope}:{relative_path}")
        report.entries += len(outcome.removed)
    for scope, done in outcomes.items():
        trash_dir = roots[scope] / TRASH_FOLDER / trash_id
        atomic_write_json(
            trash_dir / MANIFEST_NAME, _manifest(trash_id, scope, plan.query, now, done)
        )
        report.trash.append(trash_dir)
        _leave_tombstones(roots[scope], scope, trash_id, plan.query, done, now, session_id)
        for outcome in done:
            record_version(
                roots[scope], outcome.relative_path, outcome.current,
                previous=outcome.previous, operation="forget", now=now, session_id=session_id,
                why=f"forgotten: {plan.query}",
            )  # fmt: skip
    report.ok = report.entries > 0
    report.message = _forget_message(report, plan.query)
    return report


def _leave_tombstones(
    root: Path,
    scope: MemoryScope,
    trash_id: str,
    query: str,
    outcomes: Sequence[_Outcome],
    now: float,
    session_id: str,
) -> None:
    removed = [c for outcome in outcomes for c in outcome.removed]
    tombstones = [
        Tombstone.of(
            Statement(c.title, c.description, c.summary),
            id=f"{trash_id}:{n}",
            forgotten_at=now,
            scope=scope,
            relative_path=c.relative_path,
            query=query,
            trash_id=trash_id,
            session_id=session_id,
        )
        for n, c in enumerate(removed)
    ]
    try:
        add_tombstones(root, tombstones)
    except OSError as error:  # the forget itself is done; say it may not stick
        _log.warning(f"{root / TOMBSTONES_FILE_NAME}: tombstones not written ({error})")


def _manifest(
    trash_id: str,
    scope: MemoryScope,
    query: str,
    now: float,
    outcomes: Sequence[_Outcome],
    *,
    operation: str = "forget",
) -> dict[str, Any]:
    return {
        "version": _MANIFEST_VERSION,
        "id": trash_id,
        "scope": scope,
        "operation": operation,
        "forgotten_at": _dt.datetime.fromtimestamp(now, _dt.UTC).isoformat(),
        "query": query,
        "files": [outcome.to_json() for outcome in outcomes],
    }


def trash_files(
    root: Path,
    scope: MemoryScope,
    relatives: Sequence[str],
    *,
    operation: str,
    now: float,
    why: Mapping[str, str] | None = None,
    session_id: str = "",
    originals: Mapping[str, str | None] | None = None,
) -> Path | None:
    """Move whole memory files of ``root`` into a new trash folder with its manifest (Dream's
    deletions, an import's removals), so ``cairn memory restore`` can bring them back, and
    record each deletion in the memory's version log (``why``: per file, the reason). Call
    with the root lock held.

    ``originals`` (relative path -> the text before the operation, None for a file it created)
    are the operation's other changes: the trash keeps them too, so the restore undoes the
    whole operation (Dream: its merges' targets and its rewrites as well as its deletions).

    Returns the trash folder, or None when nothing was recorded.
    """
    trash_id = _unique_trash_id({scope: root}, now)
    folder = root / TRASH_FOLDER / trash_id
    reasons = why or {}
    done: list[_Outcome] = []
    for relative in relatives:
        previous = _read_text(root / relative)
        try:
            _move(root / relative, folder / relative)
        except FileNotFoundError:
            continue
        done.append(
            _Outcome(relative, "deleted", [], previous=previous, why=reasons.get(relative, ""))
        )
    for relative, original in (originals or {}).items():
        current = _read_text(root / relative)
        if current is None or current == original or relative in relatives:
            continue
        digest = _sha256(current.encode("utf-8"))
        if original is None:
            done.append(_Outcome(relative, "created", [], digest))
            continue
        atomic_write_bytes(folder / relative, original.encode("utf-8"))
        done.append(_Outcome(relative, "rewritten", [], digest))
    if not done:
        return None
    manifest = _manifest(trash_id, scope, "", now, done, operation=operation)
    atomic_write_json(folder / MANIFEST_NAME, manifest)
    for outcome in done:
        if outcome.action == "deleted":
            record_version(
                root, outcome.relative_path, None, previous=outcome.previous,
                operation=operation, now=now, session_id=session_id,
                why=outcome.why or f"deleted by {operation} (to the trash)",
            )  # fmt: skip
    return folder


@dataclass(frozen=True, slots=True)
class TrashedWrite:
    """A memory :func:`trash_forgotten` moved to the trash, and the fact it stated again."""

    path: Path  # where it was written
    scope: MemoryScope
    root: Path
    relative_path: str
    tombstone: Tombstone

    @property
    def why(self) -> str:
        return (
            f"the user asked to forget this on {self.tombstone.date} "
            f"({self.tombstone.title!r}) and no message of theirs stated it again"
        )


def trash_forgotten(
    roots: Sequence[tuple[MemoryScope, Path]],
    paths: Sequence[Path],
    forgotten: ForgottenFacts,
    *,
    now: float,
    session_id: str = "",
) -> list[TrashedWrite]:
    """Move each memory at ``paths`` that states a fact of ``forgotten``'s active tombstones
    again (a write past the memory guard: the check could only come after it) to a trash
    folder of its own, restorable, its version log saying why; call with the root locks held.

    A statement the memory's last recorded version already made is not learned again, as
    :meth:`ForgottenFacts.refused_by` says. Returns the memories moved.
    """
    from cairn.memory.trust.versions import read_versions

    moved: list[TrashedWrite] = []
    for path in paths:
        real = os.path.realpath(path)
        for scope, root in roots:
            real_root = os.path.realpath(root)
            if not real.startswith(real_root + os.sep):
                continue
            text = _read_text(Path(real))
            relative = Path(os.path.relpath(real, real_root)).as_posix()
            versions = read_versions(root, relative) if text is not None else []
            previous = versions[-1].content if versions else None
            tombstone = forgotten.refused_by(text, previous) if text is not None else None
            if tombstone is not None:
                trashed = TrashedWrite(path, scope, root, relative, tombstone)
                folder = trash_files(
                    root, scope, [relative], operation="remember", now=now,
                    why={relative: trashed.why}, session_id=session_id,
                )  # fmt: skip
                if folder is not None:
                    moved.append(trashed)
            break
    return moved


def _forget_message(report: ForgetReport, query: str) -> str:
    if report.entries == 0:
        why = f" ({'; '.join(report.problems)})" if report.problems else ""
        return f"Nothing was forgotten for: {query}{why}"
    noun = "entry" if report.entries == 1 else "entries"
    return (
        f"Forgot {report.entries} memory {noun} from: {', '.join(report.files)}. "
        "`cairn memory restore` brings them back."
    )


# --- restore -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TrashedForget:
    scope: MemoryScope
    root: Path
    folder: Path
    files: list[dict[str, Any]]
    operation: str = "forget"


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if data.get("version") != _MANIFEST_VERSION or not isinstance(files, list):
        return None
    return data


def _recorded_forgets(roots: Mapping[MemoryScope, Path]) -> dict[str, list[_TrashedForget]]:
    found: dict[str, list[_TrashedForget]] = {}
    for scope, root in roots.items():
        trash = root / TRASH_FOLDER
        try:
            folders = sorted(p for p in trash.iterdir() if p.is_dir())
        except OSError:
            continue
        for folder in folders:
            manifest = _read_manifest(folder)
            if manifest is not None:
                operation = str(manifest.get("operation") or "forget")
                record = _TrashedForget(scope, root, folder, manifest["files"], operation)
                found.setdefault(folder.name, []).append(record)
    return found


def _safe_relative(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    path = Path(value)
    if path.is_absolute() or ".." in path.parts:
        return None
    return path.as_posix()


@dataclass(frozen=True, slots=True)
class _Step:
    source: Path | None  # the trash copy (None: a file the operation created, to remove)
    target: Path
    root: Path
    relative: str
    label: str
    entries: int


def _restore_steps(forgets: Sequence[_TrashedForget]) -> tuple[list[_Step], list[str]]:
    """What restoring means per file, and why restoring would be unsafe."""
    steps: list[_Step] = []
    problems: list[str] = []
    for forget in forgets:
        for record in forget.files:
            relative = _safe_relative(record.get("relative_path"))
            if relative is None:
                problems.append(f"{forget.folder / MANIFEST_NAME}: a file entry is invalid")
                continue
            label = f"{forget.scope}:{relative}"
            created = record.get("action") == "created"
            source = None if created else forget.folder / relative
            target = forget.root / relative
            problem = _restore_conflict(source, target, record, label, forget.operation)
            if problem:
                problems.append(problem)
            entries = record.get("entries")
            count = max(len(entries), 1) if isinstance(entries, list) else 1
            steps.append(_Step(source, target, forget.root, relative, label, count))
    return steps, problems


def _restore_conflict(
    source: Path | None, target: Path, record: Mapping[str, Any], label: str, operation: str
) -> str:
    if source is not None and not source.is_file():
        return f"{label}: its copy is missing from the trash ({source})"
    if not target.exists():
        return ""
    if record.get("action") in ("rewritten", "created"):
        try:
            current = _sha256(target.read_bytes())
        except OSError as exc:
            return f"{label}: cannot read the current file ({exc.strerror})"
        if current == record.get("rewritten_sha256"):
            return ""
        return f"{label} was changed after the {operation}; restoring would overwrite that change"
    return f"{label} exists again; restoring would overwrite it"


def _apply(step: _Step, *, now: float, session_id: str) -> None:
    previous = _read_text(step.target)
    if step.source is None:
        step.target.unlink(missing_ok=True)
        content, why = None, "removed by the restore: the undone operation had created it"
    else:
        _move(step.source, step.target)
        content, why = _read_text(step.target), "restored from the trash"
    record_version(
        step.root, step.relative, content, previous=previous, operation="restore", now=now,
        session_id=session_id, why=why,
    )  # fmt: skip


def _remove_tombstones_of(root: Path, trash_id: str) -> None:
    try:
        ids = [t.id for t in read_tombstones(root) if t.trash_id == trash_id]
        remove_tombstones(root, ids)
    except OSError as error:  # restored; only the tombstone stays (the fact stays unlearnable)
        _log.warning(f"{root / TOMBSTONES_FILE_NAME}: tombstones not removed ({error})")


def restore_last_forget(
    roots: Mapping[MemoryScope, Path], *, now: float | None = None, session_id: str = ""
) -> ForgetReport:
    """Undo the most recent forget (and remove its tombstones), Dream (its deletions, rewrites
    and new memories) or import, or refuse, changing nothing, when that is unsafe."""
    import time

    when = time.time() if now is None else now
    recorded = _recorded_forgets(roots)
    if not recorded:
        return ForgetReport(
            False, "Nothing to restore: no forget or Dream deletion is recorded in the trash."
        )
    latest = max(recorded)
    forgets = recorded[latest]
    steps, problems = _restore_steps(forgets)
    if problems:
        return ForgetReport(
            False,
            "Not restored, nothing was changed: "
            + "; ".join(problems)
            + ". Move the file away (or restore it by hand from the trash) and try again.",
            problems=problems,
        )
    report = ForgetReport(True, "")
    for step in steps:
        _apply(step, now=when, session_id=session_id)
        if step.source is None:
            report.removed.append(step.label)
            continue
        report.files.append(step.label)
        report.entries += step.entries
    for forget in forgets:
        shutil.rmtree(forget.folder, ignore_errors=True)
        _remove_tombstones_of(forget.root, forget.folder.name)
    noun = "entry" if report.entries == 1 else "entries"
    report.message = f"Restored {report.entries} memory {noun} to: {', '.join(report.files)}."
    if report.removed:
        report.message += f" Removed what it had created: {', '.join(report.removed)}."
    return report
