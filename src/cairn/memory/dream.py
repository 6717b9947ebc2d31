"""Dream: now and then, a background agent consolidates the project memory.

:func:`auto_dream_gate` decides whether an automatic Dream may start (gates in the reference's
order: disabled, memory pressure, same session as the last Dream, under 24 h since it, a session
scan in the last 10 minutes, fewer than 5 new session recordings since it). :func:`run_dream` is
one consolidation: it takes ``consolidation.lock`` (created exclusively with our PID; stale after
an hour or when its PID is dead), runs the dreamer agent (purpose ``dream``, project memory
only, ``pinned/`` protected), then, with the root locks held, applies the deletions the agent
scheduled in ``.dream-operations.json`` once :func:`validate_manifest` accepts the whole
manifest (the file is always removed), rebuilds the indexes, writes the audit trail and
``meta.json`` (``lastDreamAt``, ``lastDreamSessionId``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from cairn.abort import AbortController
from cairn.debug_log import get_logger
from cairn.memory.agent_tools import memory_agent_context, memory_agent_registry
from cairn.memory.document import MemoryDoc
from cairn.memory.extract import existing_memories_block, record_written
from cairn.memory.locks import CONSOLIDATION_LOCK_NAME, ConsolidationLock, hold_roots_async
from cairn.memory.meta import last_dream_at, read_meta, record_dream
from cairn.memory.parse import ParseSkip, parse_memory_file
from cairn.memory.paths import INDEX_FILE_NAME, PINNED_FOLDER, TYPE_FOLDERS
from cairn.memory.pressure import under_memory_pressure
from cairn.memory.prompt import (
    HOW_TO_SAVE_SECTION,
    MEMORY_TYPES_SECTION,
    WHAT_NOT_TO_SAVE_SECTION,
)
from cairn.memory.tasks import MemoryRuntime, MemorySpace, WrittenFile, agent_limits, written_files
from cairn.vocabulary.events import SessionEvent, ToolCallStart

__all__ = [
    "DREAM_MAX_TURNS",
    "DREAM_MIN_HOURS",
    "DREAM_MIN_SESSIONS",
    "DREAM_PURPOSE",
    "DREAM_TIMEOUT_MINUTES",
    "OPERATIONS_FILE_NAME",
    "SESSION_SCAN_INTERVAL_SECONDS",
    "DreamOperations",
    "DreamReport",
    "ManifestRejected",
    "ScanClock",
    "apply_manifest",
    "auto_dream_gate",
    "consolidation_lock",
    "count_new_sessions",
    "dream_system_prompt",
    "run_dream",
    "validate_manifest",
]

DREAM_PURPOSE = "dream"
DREAM_MAX_TURNS = 8  # the dreamer's turn budget (memory.agentMaxTurns overrides)
DREAM_TIMEOUT_MINUTES = 5.0  # its time limit (memory.agentTimeoutMinutes overrides; 0 = none)
DREAM_MIN_HOURS = 24.0  # hours between automatic Dreams
DREAM_MIN_SESSIONS = 5  # new session recordings needed since the last Dream
SESSION_SCAN_INTERVAL_SECONDS = 600.0  # at most one chats-folder scan per 10 minutes
DREAM_INSPECT_CHARS = 1_200  # a memory body longer than this is worth a look
DREAM_SPLIT_CHARS = 2_400  # one longer than this is compressed or split
DREAM_SUMMARY_CHARS = 300  # characters of the dreamer's answer kept in the report
MAX_MANIFEST_BYTES = 1024 * 1024  # a larger operations manifest is rejected unread
OPERATIONS_FILE_NAME = ".dream-operations.json"
MANIFEST_VERSION = 1
SESSION_FILE = re.compile(r"^[0-9a-fA-F-]{32,36}\.jsonl$")  # recordings that count as sessions
_log = get_logger("MEMORY_DREAM")

Progress = Callable[[str], Awaitable[None]]
DreamStatus = Literal["updated", "noop", "skipped", "failed", "cancelled"]


# --- gates -----------------------------------------------------------------------------------


@dataclass
class ScanClock:
    """When this process last scanned a project's recordings (the 10-minute throttle)."""

    last_scan_at: float | None = None


def count_new_sessions(chats_dir: Path, *, since: float, exclude_session: str) -> int:
    """Session recordings modified after ``since``, other than ``exclude_session``'s."""
    excluded = f"{exclude_session}.jsonl"
    count = 0
    try:
        entries = list(os.scandir(chats_dir))
    except OSError:
        return 0
    for entry in entries:
        if entry.name == excluded or not SESSION_FILE.match(entry.name):
            continue
        try:
            if entry.is_file() and entry.stat().st_mtime > since:
                count += 1
        except OSError:
            continue
    return count


def auto_dream_gate(
    *,
    runtime: MemoryRuntime,
    space: MemorySpace,
    session_id: str,
    scans: ScanClock,
) -> str | None:
    """Why an automatic Dream may not start now (``None``: it may).

    The lock and "already running" gates come after this, when the run tries to start.
    """
    settings = runtime.settings.memory
    if not settings.enable_managed_auto_dream:
        return "disabled"
    if under_memory_pressure(settings.min_available_memory_mb, space.available_memory):
        return "memory_pressure"
    now = space.clock()
    meta = read_meta(space.roots.state_dir, now=now)
    if meta.get("lastDreamSessionId") == session_id:
        return "same_session"
    last = last_dream_at(meta)
    if last is not None and now - last < DREAM_MIN_HOURS * 3600:
        return "min_hours"
    if scans.last_scan_at is not None and now - scans.last_scan_at < SESSION_SCAN_INTERVAL_SECONDS:
        return "scan_throttled"
    scans.last_scan_at = now
    found = count_new_sessions(runtime.chats_dir, since=last or 0.0, exclude_session=session_id)
    if found < DREAM_MIN_SESSIONS:
        return "min_sessions"
    return None


def consolidation_lock(space: MemorySpace) -> ConsolidationLock:
    return ConsolidationLock(space.roots.state_dir / CONSOLIDATION_LOCK_NAME)


# --- the operations manifest -----------------------------------------------------------------


class ManifestRejected(ValueError):
    """The operations manifest broke a rule; none of it is applied."""


@dataclass(frozen=True)
class DreamOperations:
    delete: list[str] = field(default_factory=list)  # relative POSIX paths
    deduped: int = 0  # dedupe sources
    split: int = 0  # split operations


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
    for index, operation in enumerate(_string_list(data.get("operations"), "operations")):
        what = f"operations[{index}]"
        if not isinstance(operation, dict):
            raise ManifestRejected(f"{what}: must be an object")
        kind = operation.get("type")
        if kind == "dedupe":
            deduped += _check_dedupe(operation, root, deleted, claimed, what)
        elif kind == "split":
            _check_split(operation, root, deleted, claimed, what)
            split += 1
        else:
            raise ManifestRejected(f"{what}: unknown operation type {kind!r}")
    return DreamOperations(deletes, deduped, split)


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


def apply_manifest(root: Path) -> tuple[DreamOperations, str | None]:
    """Validate and apply ``.dream-operations.json`` (root lock held); always remove it.

    Returns what was applied and, when the manifest was rejected, why.
    """
    path = root / OPERATIONS_FILE_NAME
    try:
        data = _read_manifest(path)
        if data is None:
            return DreamOperations(), None
        operations = validate_manifest(data, root)
    except ManifestRejected as error:
        _log.warning(f"{path}: rejected, nothing deleted: {error}")
        return DreamOperations(), str(error)
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    applied: list[str] = []
    for relative in operations.delete:
        try:
            (root / relative).unlink()
            applied.append(relative)
        except FileNotFoundError:
            continue
    return DreamOperations(applied, operations.deduped, operations.split), None


# --- the dreamer -----------------------------------------------------------------------------


_DREAM_RULES = """\
You are cairn's memory consolidation agent ("Dream"). You run in the background and tidy the \
project memory folder below so that it stays accurate, small and free of duplicates. Your final \
answer is only kept as a one-line summary.

- Treat `pinned/` as read-only and leave it out of the consolidation entirely.
- Merge semantic duplicates: keep one canonical file (fold in what the others add) and delete \
the others.
- Keep information that is still accurate. Fix a stale or contradicted fact only with clear \
evidence from the memories or a recent session transcript.
- One coherent fact or rule per file. A body should stay under about 1,200 characters: \
strongly compress a file over 2,400 characters, or split it into focused files.
- Turn relative dates into absolute dates; keep the `Why:` and `How to apply:` lines.
- Never edit `MEMORY.md`: cairn rebuilds it.
- If nothing needs consolidating, change nothing."""


def _dream_steps(root: Path, chats_dir: Path, max_turns: int) -> str:
    manifest = root / OPERATIONS_FILE_NAME
    dedupe = {
        "type": "dedupe",
        "sources": ["feedback/old-duplicate.md"],
        "target": "feedback/canonical.md",
    }
    split = {
        "type": "split",
        "source": "project/big-notes.md",
        "targets": ["project/deploys.md", "project/owners.md"],
    }
    example = {
        "version": 1,
        "delete": ["feedback/old-duplicate.md", "project/big-notes.md"],
        "operations": [dedupe, split],
    }
    return f"""\
## Folders

- project memory (yours to consolidate): {root}{os.sep}
- session transcripts (read-only, JSON lines): {chats_dir}{os.sep}

## Steps (at most {max_turns} turns: batch your reads, then your writes)

1. Orient: look at the memory files listed below; read the ones that may overlap (same type \
folder, similar names or descriptions).
2. Gather signal only where a memory may have drifted: search the transcripts narrowly, e.g. \
`grep -rn "<term>" {chats_dir}/ --include="*.jsonl" | tail -50`; never read a transcript whole.
3. Consolidate with write_file and edit (read a file before you overwrite it).
4. You cannot delete files yourself. Schedule deletions by writing {manifest}:

   {json.dumps(example)}

   Paths are relative to the memory folder. Every source of a dedupe or split must also be in \
"delete"; dedupe and split targets must exist (write them first) and are never deleted. cairn \
checks the manifest after you finish and applies it only if every rule holds.

Finally, answer with one line saying what you changed."""


def dream_system_prompt(
    root: Path, chats_dir: Path, docs: Sequence[MemoryDoc], *, max_turns: int
) -> str:
    project = [doc for doc in docs if doc.scope == "project"]
    long_ones = [doc.relative_path for doc in project if len(doc.body) > DREAM_SPLIT_CHARS]
    listing = existing_memories_block(project, ["project"])
    if long_ones:
        listing += f"\n\nOver {DREAM_SPLIT_CHARS:,} characters (compress or split): " + ", ".join(
            long_ones
        )
    return "\n\n".join(
        [
            _DREAM_RULES,
            _dream_steps(root, chats_dir, max_turns),
            MEMORY_TYPES_SECTION,
            WHAT_NOT_TO_SAVE_SECTION,
            HOW_TO_SAVE_SECTION,
            f"## Memory files\n\n{listing}",
        ]
    )


DREAM_TASK = "Consolidate the project memory now, following your instructions."


@dataclass
class DreamReport:
    """What one Dream did; ``str()`` is a summary for people."""

    status: DreamStatus
    skipped_reason: str | None = None
    created: list[str] = field(default_factory=list)  # relative paths
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    deduped: int = 0
    split: int = 0
    manifest_error: str | None = None
    summary: str = ""  # the dreamer's last answer (at most 300 characters)
    agent_status: str | None = None
    error: str = ""
    duration_s: float = 0.0
    touched_topics: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)

    def __str__(self) -> str:
        if self.status == "skipped":
            reason = self.skipped_reason or ""
            return _SKIP_MESSAGES.get(reason, f"Dream skipped ({reason}).")
        if self.status in ("failed", "cancelled"):
            return f"Dream {self.status}: {self.error or self.agent_status or 'no details'}"
        lines = [
            "Dream finished: "
            + (
                f"{len(self.created)} created, {len(self.updated)} updated, "
                f"{len(self.deleted)} deleted"
                if self.changed
                else "no changes"
            )
            + f" ({self.duration_s:.1f} s)."
        ]
        changes = (("created", self.created), ("updated", self.updated), ("deleted", self.deleted))
        for label, paths in changes:
            lines.extend(f"  {label}: {path}" for path in paths)
        if self.manifest_error:
            lines.append(f"Deletions were not applied: {self.manifest_error}")
        if self.agent_status and self.agent_status != "completed":
            lines.append(f"The dreamer stopped early ({self.agent_status}).")
        if self.summary:
            lines.append(f"Summary: {self.summary}")
        return "\n".join(lines)


_SKIP_MESSAGES = {
    "locked": "Dream is already running for this project (consolidation.lock is held); try later.",
    "no_project_memory": "There is no project memory folder to consolidate here.",
    "disabled": "Managed memory is off.",
}


def _snapshot(root: Path) -> dict[str, str]:
    """Digest of every memory file under ``root`` (no dot names, no symlinks, not MEMORY.md)."""
    found: dict[str, str] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            path = Path(folder, name)
            if name.startswith(".") or not name.endswith(".md") or path.is_symlink():
                continue
            relative = path.relative_to(root).as_posix()
            if relative == INDEX_FILE_NAME:
                continue
            with contextlib.suppress(OSError):
                found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


async def _say(progress: Progress | None, text: str) -> None:
    if progress is None:
        return
    try:
        await progress(text)
    except Exception as error:  # a broken progress display must not stop Dream
        _log.warning(f"dream progress callback failed: {error!r}")


async def run_dream(
    *,
    runtime: MemoryRuntime,
    space: MemorySpace,
    session_id: str,
    progress: Progress | None = None,
) -> DreamReport:
    """One consolidation of the project memory (lock gate only). Never raises but cancellation."""
    started = time.monotonic()
    root = space.roots.project
    if root is None:
        return DreamReport("skipped", "no_project_memory")
    lock = consolidation_lock(space)
    root.mkdir(parents=True, exist_ok=True)
    async with hold_roots_async([root]):
        # The manager runs one Dream per project per process: a lock with our PID is a leftover.
        acquired = lock.try_acquire(time.time(), ours_is_stale=True)
        if acquired:
            with contextlib.suppress(FileNotFoundError):
                (root / OPERATIONS_FILE_NAME).unlink()  # a stale manifest never applies later
    if not acquired:
        return DreamReport("skipped", "locked")
    try:
        report = await _dream_locked(runtime, space, root, session_id, progress)
    finally:
        lock.release()
    report.duration_s = time.monotonic() - started
    return report


async def _dream_locked(
    runtime: MemoryRuntime,
    space: MemorySpace,
    root: Path,
    session_id: str,
    progress: Progress | None,
) -> DreamReport:
    from cairn.agent.subagent import run_subagent  # the agent loop: only when a run happens

    docs = space.docs()
    before = _snapshot(root)
    await _say(progress, f"Reading {len(before)} project memories…")
    max_turns, timeout = agent_limits(
        runtime.settings, default_turns=DREAM_MAX_TURNS, default_minutes=DREAM_TIMEOUT_MINUTES
    )
    registry, files = memory_agent_registry(allowed_names=[OPERATIONS_FILE_NAME])
    ctx = memory_agent_context(
        workspace=root,
        writable=[root],
        readable=[runtime.chats_dir],
        files=files,
        abort=AbortController().signal,
        session_id=session_id,
    )

    async def on_event(event: SessionEvent) -> None:
        if isinstance(event, ToolCallStart):
            await _say(progress, event.title.replace(f"{root}{os.sep}", ""))

    report = DreamReport("noop")
    await _say(progress, "Consolidating with the model…")
    try:
        result = await run_subagent(
            provider=runtime.provider,
            settings=runtime.settings,
            purpose=DREAM_PURPOSE,
            system_prompt=dream_system_prompt(root, runtime.chats_dir, docs, max_turns=max_turns),
            task=DREAM_TASK,
            registry=registry,
            ctx=ctx,
            max_turns=max_turns,
            timeout=timeout,
            session_id=session_id,
            events=on_event,
        )
        report.agent_status = result.status
        report.summary = " ".join(result.text.split())[:DREAM_SUMMARY_CHARS]
    except Exception as error:  # Dream is best effort: a failure is reported
        report.status = "failed"
        report.error = f"{type(error).__name__}: {error}"
        _log.warning(f"dream failed: {report.error}")
    await _say(progress, "Applying changes and rebuilding the index…")
    written = written_files(files.written, [("project", root)])
    await _finish(space, root, session_id, report, before, written)
    return report


async def _finish(
    space: MemorySpace,
    root: Path,
    session_id: str,
    report: DreamReport,
    before: Mapping[str, str],
    written: Sequence[WrittenFile],
) -> None:
    roots = [r for _, r in space.writable_roots()]
    async with hold_roots_async(roots):
        if report.status == "failed":
            with contextlib.suppress(FileNotFoundError):
                (root / OPERATIONS_FILE_NAME).unlink()
            operations = DreamOperations()
        else:
            operations, report.manifest_error = apply_manifest(root)
        after = _snapshot(root)
        mine = [f.relative_path for f in written if f.relative_path != OPERATIONS_FILE_NAME]
        report.created = [p for p in mine if p not in before and p in after]
        report.updated = [p for p in mine if p in before and after.get(p) not in (None, before[p])]
        report.deleted = list(operations.delete)
        report.deduped, report.split = operations.deduped, operations.split
        changed = [*report.created, *report.updated, *report.deleted]
        report.touched_topics = sorted(
            {p.split("/", 1)[0] for p in changed if p.split("/", 1)[0] in TYPE_FOLDERS}
        )
        if report.status != "failed":
            report.status = "updated" if changed else "noop"
        files = [WrittenFile("project", p, None) for p in changed]
        detail = (
            f"created {len(report.created)}, updated {len(report.updated)}, "
            f"deleted {len(report.deleted)}"
        )
        record_written(space, files, operation="dream", session_id=session_id, detail=detail)
        if report.status != "failed":
            record_dream(
                space.roots.state_dir,
                session_id=session_id,
                touched_topics=report.touched_topics,
                now=space.clock(),
            )
