"""Extract: after a turn, a background agent saves what is worth remembering.

:func:`run_extract` is one extraction for one request (the manager decides when it runs and
coalesces requests). In order:

1. the memory-pressure gate (skip, cursor unmoved);
2. the cursor (``extract-cursor.json``): reused for the same session, 0 for a new session or a
   shorter history; with no new non-empty user message since, the cursor moves to the end and
   nothing runs;
3. the extraction agent (:func:`cairn.agent.subagent.run_subagent`, purpose ``extract``) on the
   session's model, over the recent conversation with every ``<system-reminder>`` block (recalled
   memory included) and hook context removed, so a recalled memory is never saved again as a new
   fact; it may write only inside the project and user memory roots (never ``pinned/``), and
   never a fact the user asked to forget (:mod:`cairn.memory.forget.tombstones`) unless a
   message after the cursor states it again;
4. with the root locks held: indexes rebuilt from disk, the audit trail, ``meta.json``, and the
   cursor, moved to the end only when the agent wrote a file or called a tool (a model that
   answers without tools retries the same messages next turn).

:func:`turn_wrote_memory` is the ``memory_tool`` check the manager runs first: a turn whose own
agent already wrote memory is not extracted again.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cairn.abort import AbortController
from cairn.content import Content, FunctionCall, FunctionResponse, Part, Text, clip_text
from cairn.debug_log import get_logger
from cairn.memory.background.agent_tools import memory_agent_context, memory_agent_registry
from cairn.memory.background.cursor import ExtractCursor, read_cursor, start_offset, write_cursor
from cairn.memory.background.meta import record_extraction
from cairn.memory.background.pressure import under_memory_pressure
from cairn.memory.background.tasks import (
    MemoryRuntime,
    MemorySpace,
    WrittenFile,
    agent_limits,
    written_files,
)
from cairn.memory.background.turn_writes import (
    is_user_message,
    last_user_message,
    strip_injected_context,
    turn_wrote_memory,
)
from cairn.memory.document import MemoryDoc, MemoryScope
from cairn.memory.forget.tombstones import ForgottenFacts, lifted_detail
from cairn.memory.prompt import MEMORY_AGENT_RULES
from cairn.memory.store.history import HistoryEntry, append_history
from cairn.memory.store.locks import hold_roots, hold_roots_async

__all__ = [
    "EXTRACT_HISTORY_ENTRIES",
    "EXTRACT_MAX_TURNS",
    "EXTRACT_PURPOSE",
    "EXTRACT_TIMEOUT_MINUTES",
    "EXTRACT_WINDOW_STEP",
    "MAX_TOPIC_SUMMARY_CHARS",
    "ExtractOutcome",
    "ExtractRequest",
    "existing_memories_block",
    "extraction_history",
    "extraction_system_prompt",
    "has_new_user_messages",
    "new_user_messages",
    "record_written",
    "run_extract",
    "strip_injected_context",
    "turn_wrote_memory",
    "window_start",
]

EXTRACT_PURPOSE = "extract"
EXTRACT_MAX_TURNS = 5  # the extraction agent's turn budget (memory.agentMaxTurns overrides)
EXTRACT_TIMEOUT_MINUTES = 2.0  # its time limit (memory.agentTimeoutMinutes overrides; 0 = none)
EXTRACT_HISTORY_ENTRIES = 40  # conversation entries the extraction agent sees, at least
# Its window starts at a multiple of this many entries (so it holds 40 to 59): consecutive
# extractions then repeat one conversation prefix, which a provider's prompt cache serves.
EXTRACT_WINDOW_STEP = 20
MAX_TOPIC_SUMMARY_CHARS = 280  # characters of each existing memory shown in its prompt
MAX_LISTED_MEMORIES = 200  # existing memories listed in its prompt
MAX_TOOL_OUTPUT_CHARS = 2_000  # characters of each tool result in the history it sees
MAX_WHY_QUOTE_CHARS = 200  # characters of the user's words quoted in a memory's version log
CANCELLED_CLEANUP_LOCK_SECONDS = 1.0  # lock wait when recording writes of a cancelled run
_PLACEHOLDER_RESPONSE = "Background extraction started."
_SPACES = re.compile(r"\s+")
_log = get_logger("MEMORY_EXTRACT")

ExtractStatus = Literal["completed", "skipped", "failed", "cancelled"]


@dataclass
class ExtractRequest:
    project_root: Path
    session_id: str
    history: list[Content]  # the session's history after the turn (entries copied)
    runtime: MemoryRuntime


@dataclass
class ExtractOutcome:
    status: ExtractStatus
    skipped_reason: str | None = None
    files: list[WrittenFile] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # labels of files that did not exist before
    agent_status: str | None = None  # the agent's own end: completed, max_turns, timeout, ...
    tool_calls: int = 0
    cursor_advanced: bool = False
    error: str = ""

    @property
    def touched_topics(self) -> list[str]:
        return sorted({f.topic for f in self.files if f.topic is not None})


# --- what the extraction agent sees --------------------------------------------------------


def has_new_user_messages(history: Sequence[Content], start: int) -> bool:
    return any(is_user_message(entry) for entry in history[start:])


def new_user_messages(history: Sequence[Content], start: int) -> list[str]:
    """What the user wrote in ``history[start:]`` (injected context removed), one per message."""
    return [
        " ".join(strip_injected_context(p.text) for p in entry.parts if isinstance(p, Text))
        for entry in history[start:]
        if is_user_message(entry)
    ]


def _clean_part(part: Part) -> Part | None:
    if isinstance(part, Text):
        text = strip_injected_context(part.text)
        return Text(text) if text.strip() else None
    if isinstance(part, FunctionResponse):
        output = part.text
        if len(output) <= MAX_TOOL_OUTPUT_CHARS:
            return part
        key = "error" if part.is_error else "output"
        cut = clip_text(output, MAX_TOOL_OUTPUT_CHARS, "\n[... {dropped} characters cut]")
        return FunctionResponse(part.id, part.name, {key: cut})
    if isinstance(part, FunctionCall):
        return part
    return None  # reasoning is not part of what was said


def _clean(entry: Content) -> Content | None:
    parts = [p for p in map(_clean_part, entry.parts) if p is not None]
    return Content(entry.role, parts) if parts else None


def _open_calls(entry: Content) -> list[FunctionCall]:
    return [p for p in entry.parts if isinstance(p, FunctionCall)]


def window_start(length: int) -> int:
    """Where the window of a history of ``length`` entries starts: the last multiple of 20
    that leaves at least 40 entries in it (0 for a history of 59 entries or fewer)."""
    cut = max(0, length - EXTRACT_HISTORY_ENTRIES)
    return cut // EXTRACT_WINDOW_STEP * EXTRACT_WINDOW_STEP


def extraction_history(history: Sequence[Content]) -> list[Content]:
    """The last 40 to 59 entries (from :func:`window_start`), cleaned, ending with a model
    message.

    The window's start moves only every 20 entries, so the next extraction's conversation
    begins as this one's did and the provider's prompt cache serves it. Injected context goes;
    tool results are cut to 2,000 characters; leading tool results whose calls were cut off
    go; when no user message is left in the window, the last one before it leads; a trailing
    user entry goes; tool calls left open at the end get a placeholder result and an
    acknowledgement, so the conversation is one a provider accepts.
    """
    start = window_start(len(history))
    cleaned = [c for c in map(_clean, history[start:]) if c is not None]
    while cleaned and any(isinstance(p, FunctionResponse) for p in cleaned[0].parts):
        cleaned.pop(0)
    if not any(is_user_message(entry) for entry in cleaned):
        earlier = last_user_message(history[:start])
        lead = _clean(history[earlier]) if earlier >= 0 else None
        if lead is not None:
            cleaned.insert(0, lead)
    while cleaned and cleaned[-1].role == "user":
        cleaned.pop()
    if cleaned and _open_calls(cleaned[-1]):
        responses: list[Part] = [
            FunctionResponse(call.id, call.name, {"output": _PLACEHOLDER_RESPONSE})
            for call in _open_calls(cleaned[-1])
        ]
        cleaned.append(Content("user", responses))
        cleaned.append(Content.model("Acknowledged."))
    return cleaned


def _preview(doc: MemoryDoc) -> str:
    body = _SPACES.sub(" ", doc.body).strip()
    if len(body) > MAX_TOPIC_SUMMARY_CHARS:
        body = body[:MAX_TOPIC_SUMMARY_CHARS].rstrip() + "…"
    return body


def existing_memories_block(docs: Sequence[MemoryDoc], scopes: Sequence[MemoryScope]) -> str:
    """The existing memories, one entry each, with a 280-character preview of the body."""
    listed = [doc for doc in docs if doc.scope in scopes][:MAX_LISTED_MEMORIES]
    if not listed:
        return "(no memories yet)"
    lines: list[str] = []
    for doc in listed:
        pinned = " (pinned: read-only)" if doc.pinned else ""
        lines.append(f"- [{doc.title}]({doc.relative_path}) — {doc.description or doc.type}")
        lines.append(f"  scope={doc.scope} type={doc.type} size={doc.size} path={doc.path}{pinned}")
        lines.append(f"  current={_preview(doc)}")
    if len(docs) > len(listed):
        lines.append(f"(... {len(docs) - len(listed)} more not listed; use glob to find them)")
    return "\n".join(lines)


_EXTRACT_RULES = """\
You are cairn's memory extraction agent. You run in the background after a turn of the \
conversation above and save what is worth remembering in future conversations into the memory \
folders below. Nobody reads your answer: only the files you write matter.

- Analyse only the recent conversation above. Save only durable facts and preferences that the \
user stated or confirmed: who they are, how they want you to work, project decisions and \
deadlines, where outside information lives.
- Ignore questions, speculation, temporary task state and anything only the assistant said.
- When the user explicitly asked to remember something, save it (unless the rules below say \
it is not worth saving).
- Read the existing memory files that may cover the same subject first, and update an existing \
memory rather than writing a duplicate.
- Keep each memory short and specific: no bullet markers, one subject per file.
- Never look at the project's code, its git history or files outside the memory folders.
- Files under `pinned/` are read-only. Never edit `MEMORY.md`: cairn rebuilds it.
- If nothing is worth saving, change nothing and answer "Nothing to save."."""


def extraction_system_prompt(
    roots: Sequence[tuple[MemoryScope, Path]],
    docs: Sequence[MemoryDoc],
    *,
    max_turns: int,
    forgotten: str = "",
) -> str:
    """Rules, both memory folders (absolute paths), the existing memories and the facts the
    user asked to forget (``forgotten``, a prompt block)."""
    folders = "\n".join(f"- {scope} memory: {root}{os.sep}" for scope, root in roots)
    sections = [
        _EXTRACT_RULES,
        "## Memory folders\n\n"
        f"{folders}\n\n"
        "Pick the folder by the memory's type (see the types below). One memory per file, "
        "in its type's subfolder: `user/`, `feedback/`, `project/` or `reference/`. Use "
        "absolute paths.",
        "## Tools\n\n"
        "read_file, grep_search, glob, run_shell_command (read-only commands only), "
        f"write_file and edit. You have at most {max_turns} turns: issue every read you "
        "need in one turn, then every write in the next. `edit` needs the exact current "
        "text; `write_file` over an existing memory needs a `read_file` of it first.",
        MEMORY_AGENT_RULES,
        "## Existing memory files\n\n"
        + existing_memories_block(docs, [scope for scope, _ in roots]),
    ]
    return "\n\n".join([*sections, forgotten] if forgotten else sections)


EXTRACT_TASK = (
    "Review the conversation above and update the memory folders now, following the rules in "
    "your instructions. If nothing durable was said, make no changes."
)


# --- one extraction ------------------------------------------------------------------------


def record_written(
    space: MemorySpace,
    files: Sequence[WrittenFile],
    *,
    operation: str,
    session_id: str,
    detail: str = "",
) -> None:
    """Rebuild the indexes and append the audit lines (call with the root locks held)."""
    if not files:
        return
    space.rebuild_indexes()
    now = space.clock()
    for scope, root in space.writable_roots():
        mine = [f.relative_path for f in files if f.scope == scope]
        if mine:
            entry = HistoryEntry(now, operation, scope, mine, session_id, detail, len(mine))
            append_history(root, entry)


def _all_roots(space: MemorySpace) -> list[Path]:
    return [root for _, root in space.writable_roots()]


async def run_extract(request: ExtractRequest, space: MemorySpace) -> ExtractOutcome:
    """One extraction (see the module docstring). Never raises, except cancellation."""
    settings = request.runtime.settings
    if under_memory_pressure(settings.memory.min_available_memory_mb, space.available_memory):
        return ExtractOutcome("skipped", "memory_pressure")
    roots = space.writable_roots()
    state_dir = space.roots.state_dir
    now = space.clock()
    history = request.history
    cursor = read_cursor(state_dir, now=now)
    start = start_offset(cursor, request.session_id, len(history))
    if not has_new_user_messages(history, start):
        async with hold_roots_async(_all_roots(space)):
            write_cursor(state_dir, ExtractCursor(request.session_id, len(history)), now=now)
        return ExtractOutcome("skipped", "no_new_messages", cursor_advanced=True)
    roots[0][1].mkdir(parents=True, exist_ok=True)  # the agent's working folder
    # A forgotten fact stays forgotten unless the user states it again in a message no earlier
    # extraction saw (one after the cursor, so one written after the forget).
    forgotten = await asyncio.to_thread(
        ForgottenFacts.load,
        [root for _, root in roots],
        new_messages=new_user_messages(history, start),
    )
    return await _run_agent(request, space, roots, forgotten)


async def _run_agent(
    request: ExtractRequest,
    space: MemorySpace,
    roots: list[tuple[MemoryScope, Path]],
    forgotten: ForgottenFacts,
) -> ExtractOutcome:
    from cairn.agent.subagent import run_subagent  # the agent loop: only when a run happens

    settings = request.runtime.settings
    max_turns, timeout = agent_limits(
        settings, default_turns=EXTRACT_MAX_TURNS, default_minutes=EXTRACT_TIMEOUT_MINUTES
    )
    turn = sum(1 for entry in request.history if is_user_message(entry))
    said = new_user_messages(request.history, 0)
    why = (
        f"from the conversation: “{clip_text(said[-1], MAX_WHY_QUOTE_CHARS, '…')}”" if said else ""
    )
    author = space.author("extract", request.session_id, turn, why=why)
    registry, files = memory_agent_registry(forgotten=forgotten, author=author)
    ctx = memory_agent_context(
        workspace=roots[0][1],
        writable=[root for _, root in roots],
        readable=(),
        files=files,
        abort=AbortController().signal,
        session_id=request.session_id,
    )
    outcome = ExtractOutcome("completed")
    docs = space.docs()
    existing = {f"{doc.scope}:{doc.relative_path}" for doc in docs}
    try:
        result = await run_subagent(
            provider=request.runtime.provider,
            settings=settings,
            purpose=EXTRACT_PURPOSE,
            system_prompt=extraction_system_prompt(
                roots, docs, max_turns=max_turns, forgotten=forgotten.prompt_block()
            ),
            task=EXTRACT_TASK,
            registry=registry,
            ctx=ctx,
            history=extraction_history(request.history),
            max_turns=max_turns,
            timeout=timeout,
            session_id=request.session_id,
        )
        outcome.agent_status = result.status
        outcome.tool_calls = result.tool_calls
        if result.status != "completed":
            outcome.status = "failed"
            outcome.error = f"the extraction agent stopped: {result.status}"
    except asyncio.CancelledError:
        outcome.files = written_files(files.written, roots)
        _record_cancelled(request, space, outcome)
        raise
    except Exception as error:  # Extract is best effort: a failure is reported
        outcome.status = "failed"
        outcome.error = f"{type(error).__name__}: {error}"
        _log.warning(f"extraction failed: {outcome.error}")
    outcome.files = written_files(files.written, roots)
    outcome.created = [f.label for f in outcome.files if f.label not in existing]
    await _finish(request, space, outcome, forgotten)
    return outcome


async def _finish(
    request: ExtractRequest,
    space: MemorySpace,
    outcome: ExtractOutcome,
    forgotten: ForgottenFacts | None = None,
) -> None:
    """Indexes, audit trail, meta.json and cursor, with the root locks held; the tombstones
    of forgotten facts the user stated again and this run saved are removed."""
    progress = bool(outcome.files) or outcome.tool_calls > 0
    now = space.clock()
    async with hold_roots_async(_all_roots(space)):
        restated = forgotten.release() if forgotten is not None and outcome.files else []
        detail = lifted_detail(restated)
        record_written(
            space,
            outcome.files,
            operation="extract",
            session_id=request.session_id,
            detail=detail,
        )
        if outcome.status == "completed":
            record_extraction(
                space.roots.state_dir,
                session_id=request.session_id,
                touched_topics=outcome.touched_topics,
                now=now,
            )
        if progress:
            cursor = ExtractCursor(request.session_id, len(request.history))
            write_cursor(space.roots.state_dir, cursor, now=now)
            outcome.cursor_advanced = True


def _record_cancelled(request: ExtractRequest, space: MemorySpace, outcome: ExtractOutcome) -> None:
    """A run cancelled after writing (shutdown): still index and log what it wrote."""
    outcome.status = "cancelled"
    if not outcome.files:
        return
    try:
        with hold_roots(_all_roots(space), timeout=CANCELLED_CLEANUP_LOCK_SECONDS):
            record_written(space, outcome.files, operation="extract", session_id=request.session_id)
    except Exception as error:  # the next run or `cairn memory reindex` catches up
        _log.warning(f"writes of a cancelled extraction not indexed yet: {error!r}")
