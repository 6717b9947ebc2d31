"""The entries of a memory body: a summary line, then ``Why:`` and ``How to apply:``.

Two body shapes are read (the reference's ``entries`` rules):

- one memory per file (current): the first plain line is the summary; top-level ``Why:`` and
  ``How to apply:`` lines (keys may be ``**bold**``, any case) fill the fields;
- the legacy multi-entry body: ``# Heading``, then ``- summary`` bullets, each with indented
  ``Why:`` / ``How to apply:`` children.

A plain line opens the first entry only when none is open; later plain lines are ignored.
Whitespace inside values is collapsed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from cairn.values import Value, replace

__all__ = [
    "EMPTY_BODY_PLACEHOLDER",
    "MemoryEntry",
    "merge_entry",
    "parse_entries",
    "render_entries",
]

EMPTY_BODY_PLACEHOLDER = "_No entries yet._"  # what an empty legacy topic file holds


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Heading, field, bullet, whitespace run: compiled on first use (a start-up reads no
    entries, and compiling them cost ~2 M instructions before the first request)."""
    return (
        re.compile(r"^#{1,6}(?:\s|$)"),
        re.compile(
            r"^(?P<indent>[ \t]*)(?:[-*][ \t]+)?(?:\*\*)?(?P<key>why|how[ _]to[ _]apply)(?:\*\*)?"
            r"[ \t]*:(?:\*\*)?[ \t]*(?P<value>.*)$",
            re.IGNORECASE,
        ),
        re.compile(r"^[-*][ \t]+(?P<value>.*)$"),
        re.compile(r"\s+"),
    )


class MemoryEntry(Value):
    summary: str
    why: str = ""
    how_to_apply: str = ""

    @property
    def search_text(self) -> str:
        """What Forget's substring fallback matches against."""
        return f"{self.summary} {self.why} {self.how_to_apply}".lower()


def _collapse(text: str) -> str:
    return _patterns()[3].sub(" ", text).strip()


def _with_field(entry: MemoryEntry, key: str, value: str) -> MemoryEntry:
    if key.lower() == "why":
        return replace(entry, why=value)
    return replace(entry, how_to_apply=value)


def parse_entries(body: str) -> list[MemoryEntry]:
    """The entries of a memory body, in order; an empty or placeholder body has none."""
    entries: list[MemoryEntry] = []
    heading, field_line, bullet_line, _spaces = _patterns()
    for raw in body.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped == EMPTY_BODY_PLACEHOLDER or heading.match(stripped):
            continue
        field = field_line.match(line)
        if field is not None:
            if entries:
                entries[-1] = _with_field(entries[-1], field["key"], _collapse(field["value"]))
            continue
        if line[:1] in (" ", "\t"):
            continue  # indented prose under a bullet belongs to no field
        bullet = bullet_line.match(line)
        if bullet is not None:
            entries.append(MemoryEntry(summary=_collapse(bullet["value"])))
        elif not entries:
            entries.append(MemoryEntry(summary=_collapse(stripped)))
    return entries


def _render_entry(entry: MemoryEntry) -> str:
    parts = [entry.summary]
    if entry.why:
        parts.append(f"Why: {entry.why}")
    if entry.how_to_apply:
        parts.append(f"How to apply: {entry.how_to_apply}")
    return "\n\n".join(parts)


def render_entries(entries: Iterable[MemoryEntry]) -> str:
    """Entries as a body: summary, blank line, ``Why: ...``, blank line, ``How to apply: ...``."""
    rendered = [_render_entry(entry) for entry in entries]
    return "\n\n".join(rendered) if rendered else EMPTY_BODY_PLACEHOLDER


def merge_entry(current: MemoryEntry, incoming: MemoryEntry) -> MemoryEntry:
    """The incoming summary, with the first non-empty ``why`` and ``how_to_apply``."""
    return MemoryEntry(
        summary=incoming.summary,
        why=incoming.why or current.why,
        how_to_apply=incoming.how_to_apply or current.how_to_apply,
    )
