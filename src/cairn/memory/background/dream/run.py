"""One Dream: the dreamer agent consolidates the project memory, then cairn applies its changes.

:func:`run_dream` takes ``consolidation.lock`` (created exclusively with our PID; stale after an
hour or when its PID is dead), runs the dreamer agent (purpose ``dream``, project memory only,
``pinned/`` protected), then, with the root locks held, applies the deletions the agent
scheduled in ``.dream-operations.json`` (see :mod:`~cairn.memory.background.dream.manifest`),
rebuilds the indexes, writes the audit trail and ``meta.json`` (``lastDreamAt``,
``lastDreamSessionId``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cairn.abort import AbortController
from cairn.debug_log import get_logger
from cairn.fsutil import read_regular_bytes
from cairn.memory.background.agent_tools import memory_agent_context, memory_agent_registry
from cairn.memory.background.dream.gates import consolidation_lock
from cairn.memory.background.dream.manifest import (
    OPERATIONS_FILE_NAME,
    DreamOperations,
    apply_manifest,
    memory_digests,
)
from cairn.memory.background.extract import existing_memories_block, record_written
from cairn.memory.background.meta import record_dream
from cairn.memory.background.tasks import (
    MemoryRuntime,
    MemorySpace,
    WrittenFile,
    agent_limits,
    written_files,
)
from cairn.memory.document import MemoryDoc
from cairn.memory.forget.tombstones import ForgottenFacts
from cairn.memory.paths import TYPE_FOLDERS
from cairn.memory.prompt import MEMORY_AGENT_RULES
from cairn.memory.store.locks import hold_roots_async
from cairn.vocabulary.events import MemoryChanged, SessionEvent, ToolCallStart

__all__ = [
    "DREAM_MAX_TURNS",
    "DREAM_PURPOSE",
    "DREAM_TIMEOUT_MINUTES",
    "DreamReport",
    "dream_system_prompt",
    "run_dream",
]

DREAM_PURPOSE = "dream"
DREAM_MAX_TURNS = 8  # the dreamer's turn budget (memory.agentMaxTurns overrides)
DREAM_TIMEOUT_MINUTES = 5.0  # its time limit (memory.agentTimeoutMinutes overrides; 0 = none)
DREAM_INSPECT_CHARS = 1_200  # a memory body longer than this is worth a look
DREAM_SPLIT_CHARS = 2_400  # one longer than this is compressed or split
DREAM_SUMMARY_CHARS = 300  # characters of the dreamer's answer kept in the report
_log = get_logger("MEMORY_DREAM")

Progress = Callable[[str], Awaitable[None]]
DreamStatus = Literal["updated", "noop", "skipped", "failed", "cancelled"]


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
- Keep each memory's `provenance:` block. When you merge or split memories, copy the evidence \
entries of every source into the targets' `provenance:` `evidence:` lists verbatim (cairn \
checks them; an entry you change is no longer trusted).
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
    root: Path,
    chats_dir: Path,
    docs: Sequence[MemoryDoc],
    *,
    max_turns: int,
    forgotten: str = "",
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
            MEMORY_AGENT_RULES,
            f"## Memory files\n\n{listing}",
            *([forgotten] if forgotten else []),
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
    deleted: list[str] = field(default_factory=list)  # moved to the trash
    kept: list[str] = field(default_factory=list)  # deletions skipped: changed since read
    deduped: int = 0
    split: int = 0
    manifest_error: str | None = None
    summary: str = ""  # the dreamer's last answer (at most 300 characters)
    agent_status: str | None = None
    error: str = ""
    duration_s: float = 0.0
    touched_topics: list[str] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)  # relative path -> title at the start
    change: MemoryChanged | None = None  # what front ends show (set by the manager)

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
        lines.extend(
            f"  kept {path}: it changed after the dreamer read it, so it was not deleted"
            for path in self.kept
        )
        if self.changed:
            lines.append(
                "`cairn memory restore` undoes this Dream (deleted memories are in the trash); "
                "`cairn memory log <memory>` shows each change."
            )
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
    "no_memories": "There are no project memories to consolidate yet.",
    "disabled": "Managed memory is off.",
}


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
    if not any(doc.scope == "project" for doc in docs):
        return DreamReport("skipped", "no_memories")  # nothing to consolidate: no model call
    before = memory_digests(root)
    await _say(progress, f"Reading {len(before)} project memories…")
    max_turns, timeout = agent_limits(
        runtime.settings, default_turns=DREAM_MAX_TURNS, default_minutes=DREAM_TIMEOUT_MINUTES
    )
    # Consolidation never re-derives a fact the user asked to forget (from either root).
    forgotten = await asyncio.to_thread(ForgottenFacts.load, [r for _, r in space.writable_roots()])
    registry, files = memory_agent_registry(
        allowed_names=[OPERATIONS_FILE_NAME],
        forgotten=forgotten,
        author=space.author("dream", session_id, versions_at_write=False),
    )
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

    report = DreamReport(
        "noop", titles={d.relative_path: d.title for d in docs if d.scope == "project"}
    )
    await _say(progress, "Consolidating with the model…")
    try:
        result = await run_subagent(
            provider=runtime.provider,
            settings=runtime.settings,
            purpose=DREAM_PURPOSE,
            system_prompt=dream_system_prompt(
                root,
                runtime.chats_dir,
                docs,
                max_turns=max_turns,
                forgotten=forgotten.prompt_block(),
            ),
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
    expected = {**before, **_seen_digests(root, files.seen)}
    originals = _relative_to(root, files.originals)
    await _finish(space, root, session_id, report, (before, expected), written, originals)
    return report


def _record_versions(
    root: Path,
    originals: Mapping[str, str | None],
    operations: DreamOperations,
    session_id: str,
    report: DreamReport,
    now: float,
) -> None:
    """The version of each memory the dreamer wrote, saying what it replaced (the root locked;
    its deletions were recorded by the trash)."""
    from cairn.memory.trust.versions import record_version

    for relative, original in originals.items():
        try:
            current = read_regular_bytes(root / relative).decode("utf-8", "replace")
        except OSError:
            continue  # deleted after all: the trash recorded it
        why = operations.made.get(relative) or "rewritten by Dream"
        if report.summary:
            why += f" ({report.summary})"
        record_version(
            root, relative, current, previous=original, operation="dream", now=now,
            session_id=session_id, why=why,
        )  # fmt: skip


def _relative_to(root: Path, found: Mapping[Path, str | None]) -> dict[str, str | None]:
    """``found`` (by resolved path) by path relative to ``root``, for what lies inside it."""
    real_root = Path(os.path.realpath(root))
    return {
        path.relative_to(real_root).as_posix(): value
        for path, value in found.items()
        if real_root in path.parents
    }


def _seen_digests(root: Path, seen: Mapping[Path, str]) -> dict[str, str]:
    """What the dreamer read (or wrote) last of each file, by path relative to ``root``."""
    real_root = Path(os.path.realpath(root))
    found: dict[str, str] = {}
    for path, digest in seen.items():
        if real_root in path.parents:
            found[path.relative_to(real_root).as_posix()] = digest
    return found


async def _finish(
    space: MemorySpace,
    root: Path,
    session_id: str,
    report: DreamReport,
    digests: tuple[Mapping[str, str], Mapping[str, str]],
    written: Sequence[WrittenFile],
    originals: Mapping[str, str | None],
) -> None:
    before, expected = digests
    roots = [r for _, r in space.writable_roots()]
    async with hold_roots_async(roots):
        if report.status == "failed":  # its deletions are dropped; its writes stay undoable
            with contextlib.suppress(FileNotFoundError):
                (root / OPERATIONS_FILE_NAME).unlink()
        applied = apply_manifest(
            root, expected=expected, now=space.clock(), session_id=session_id, originals=originals
        )
        operations, report.manifest_error, report.kept = (
            applied.operations,
            applied.error,
            applied.kept,
        )
        _record_versions(root, originals, operations, session_id, report, space.clock())
        after = memory_digests(root)
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
            f"deleted {len(report.deleted)} (to the trash)"
        )
        if report.kept:
            detail += f", kept {len(report.kept)} changed since read"
        record_written(space, files, operation="dream", session_id=session_id, detail=detail)
        if report.status != "failed":
            record_dream(
                space.roots.state_dir,
                session_id=session_id,
                touched_topics=report.touched_topics,
                now=space.clock(),
            )
