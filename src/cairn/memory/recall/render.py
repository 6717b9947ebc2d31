"""Render recalled memories as the text part injected into a model request.

::

    ## Relevant memory

    <one instruction line>

    ### <title> (<relative path>)
    Saved 3 days ago.
    > POSSIBLY STALE: learned on <date> from <file>, which has changed since. ...
    <description>

    <body, at most 1,200 characters>

    > NOTE: <age note, when older than one day>

Ages are whole days since the file's mtime, measured with the caller's clock. A memory whose
evidence changed (Recall's evidence check set its ``staleness``) is marked in its heading and
says so before its body; one whose evidence cannot be checked says that, once, in the same place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cairn.memory.document import MemoryDoc, Staleness

__all__ = [
    "MAX_DOC_BODY_CHARS",
    "RELEVANT_MEMORY_HEADING",
    "TRUNCATION_NOTE",
    "age_text",
    "freshness_text",
    "memory_age_days",
    "render_relevant_memory",
    "stale_text",
]

MAX_DOC_BODY_CHARS = 1_200  # body characters injected per recalled document
STALE_AFTER_DAYS = 1  # a staleness note is added when a memory is older than this
_SECONDS_PER_DAY = 86_400

RELEVANT_MEMORY_HEADING = "## Relevant memory"
_INSTRUCTION = (
    "Use these memories only where they bear directly on the current request, and check any "
    "claim about files or functions against the code before relying on it."
)
TRUNCATION_NOTE = "> NOTE: This memory was cut short to fit the prompt budget."
_EMPTY_BODY = "_No detailed entries yet._"


def memory_age_days(mtime: float, now: float) -> int:
    """Whole days between ``mtime`` and ``now`` (never negative)."""
    return max(0, math.floor((now - mtime) / _SECONDS_PER_DAY))


def age_text(days: int) -> str:
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago"


def freshness_text(days: int) -> str:
    """The staleness note for a memory ``days`` old, or ``""`` when it is fresh."""
    if days <= STALE_AFTER_DAYS:
        return ""
    return (
        f"This memory is {days} days old. It records what was true when it was saved, not the "
        "current state: code, file paths and line numbers it mentions may have changed. "
        "Verify against the current code before stating it as fact."
    )


def render_relevant_memory(docs: Sequence[MemoryDoc], *, now: float) -> str:
    """The ``## Relevant memory`` block for ``docs``, or ``""`` when there are none."""
    if not docs:
        return ""
    blocks = [RELEVANT_MEMORY_HEADING, _INSTRUCTION]
    blocks.extend(_render_doc(doc, now) for doc in docs)
    return "\n\n".join(blocks) + "\n"


def stale_text(staleness: Staleness) -> str:
    """The line a possibly stale (or unverifiable) memory carries before its body."""
    if staleness.state == "stale":
        files = ", ".join(staleness.files) or "its evidence"
        return (
            f"> POSSIBLY STALE: {staleness.note}. Do not state it as fact: check {files} "
            "first, and if the memory no longer holds, say so."
        )
    return f"> NOTE: {staleness.note[:1].upper()}{staleness.note[1:]}."


def _render_doc(doc: MemoryDoc, now: float) -> str:
    days = memory_age_days(doc.mtime, now)
    label = doc.relative_path or doc.path.name
    stale = doc.staleness is not None and doc.staleness.state == "stale"
    mark = " [possibly stale]" if stale else ""
    header = [f"### {doc.title} ({label}){mark}", f"Saved {age_text(days)}."]
    if doc.staleness is not None:
        header.append(stale_text(doc.staleness))
    if doc.description.strip():
        header.append(doc.description.strip())
    parts = ["\n".join(header), _body_excerpt(doc.body)]
    note = freshness_text(days)
    if note:
        parts.append(f"> NOTE: {note}")
    return "\n\n".join(parts)


def _body_excerpt(body: str) -> str:
    text = body.strip()
    if not text:
        return _EMPTY_BODY
    if len(text) <= MAX_DOC_BODY_CHARS:
        return text
    return f"{text[:MAX_DOC_BODY_CHARS].rstrip()}\n\n{TRUNCATION_NOTE}"
