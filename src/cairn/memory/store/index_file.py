"""``MEMORY.md``: the generated one-line-per-memory index of a memory root.

Each memory gets ``- [<title>](<relative path>) — <description, or the type>``, in the store's
order (newest first). The file stays within what the system prompt loads: lines of at most 150
characters (a long description is shortened, never the link), at most 200 lines and 25,000
characters in all, whole lines only; when memories had to be left out, the last line says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from cairn.fsutil import atomic_write_text
from cairn.memory.document import MemoryDoc
from cairn.memory.paths import INDEX_FILE_NAME

__all__ = [
    "MAX_INDEX_CHARS",
    "MAX_INDEX_LINES",
    "MAX_INDEX_LINE_CHARS",
    "build_index_text",
    "index_line",
    "write_index",
]

MAX_INDEX_LINE_CHARS = 150  # characters per index line
MAX_INDEX_LINES = 200  # lines in the whole file, the warning line included
MAX_INDEX_CHARS = 25_000  # characters in the whole file, newlines and the warning included
_ELLIPSIS = "…"
_WHITESPACE = re.compile(r"\s+")
_LINK_TEXT_SPECIALS = re.compile(r"([\[\]\\])")


def _clean(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _destination(relative_path: str) -> str:
    """A link target; angle brackets keep one with spaces or parentheses a single link."""
    if re.search(r"[\s()<>]", relative_path):
        return f"<{relative_path.replace('<', '%3C').replace('>', '%3E')}>"
    return relative_path


def _link(title: str, destination: str) -> str:
    escaped = _LINK_TEXT_SPECIALS.sub(r"\\\1", title)
    return f"[{escaped}]({destination})"


def _shorten(text: str, room: int) -> str:
    return text[: max(room - 1, 0)].rstrip() + _ELLIPSIS


def index_line(doc: MemoryDoc) -> str | None:
    """The index line of ``doc``, at most 150 characters; None when even its link is too long."""
    title = _clean(doc.title) or doc.type
    destination = _destination(doc.relative_path)
    tail = _clean(doc.description) or doc.type
    head = f"- {_link(title, destination)} — "
    if len(head) + len(tail) <= MAX_INDEX_LINE_CHARS:
        return head + tail
    if MAX_INDEX_LINE_CHARS - len(head) >= 2:
        return head + _shorten(tail, MAX_INDEX_LINE_CHARS - len(head))
    for keep in range(len(title) - 1, 0, -1):
        line = f"- {_link(_shorten(title, keep + 1), destination)}"
        if len(line) <= MAX_INDEX_LINE_CHARS:
            return line
    return None


def _warning(shown: int, total: int) -> str:
    return (
        f"> WARNING: {INDEX_FILE_NAME} is too large; only part of it was written "
        f"({shown} of {total} memories listed)."
    )


def build_index_text(docs: Sequence[MemoryDoc]) -> str:
    """The whole ``MEMORY.md`` text for ``docs`` (already in index order); empty for none."""
    lines = [line for line in map(index_line, docs) if line is not None]
    size = sum(len(line) + 1 for line in lines)
    if len(lines) == len(docs) and len(lines) <= MAX_INDEX_LINES and size <= MAX_INDEX_CHARS:
        return "".join(f"{line}\n" for line in lines)
    reserve = len(_warning(len(docs), len(docs))) + 1
    kept: list[str] = []
    used = 0
    for line in lines:
        if len(kept) == MAX_INDEX_LINES - 1:
            break
        if used + len(line) + 1 + reserve <= MAX_INDEX_CHARS:
            kept.append(line)
            used += len(line) + 1
    return "".join(f"{line}\n" for line in [*kept, _warning(len(kept), len(docs))])


def write_index(root: Path, docs: Sequence[MemoryDoc]) -> bool:
    """Write ``<root>/MEMORY.md`` atomically; False when it already held exactly this text."""
    text = build_index_text(docs)
    path = root / INDEX_FILE_NAME
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write_text(path, text)
    return True
