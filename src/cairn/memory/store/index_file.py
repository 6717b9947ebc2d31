"""``MEMORY.md``: the generated one-line-per-memory index of a memory root.

Each memory gets ``- [<title>](<relative path>) — <description, or the type>``, in the store's
order (newest first). The file stays within what the system prompt loads: at most 200 lines and
25,000 characters in all, whole lines only; a line keeps to 150 characters by shortening the
description, then the title, never the link (a memory whose path alone is longer still gets its
line). When the budget forces memories out, lines of at most 150 characters are kept first, in
their order, and the last line says how many were left out. Every step is linear in the length
of the fields, so a pathological title cannot stall a rebuild.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from cairn.fsutil import atomic_write_text, read_regular_bytes
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
# Line breaks and controls: not in links. Text, compiled by ``re`` when first needed (this
# character class alone costs ~2.5 M instructions to compile, before a first request).
_CONTROL = "[\x00-\x1f\x7f\x85\u2028\u2029]"
_SHORT_TITLE_CHARS = 40  # the title of a line whose path alone passes 150 characters


def _clean(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _destination(relative_path: str) -> str:
    """A link target on one line; angle brackets keep one with spaces or parentheses one link."""
    encoded = relative_path
    if not relative_path.isprintable():  # a printable path holds none of _CONTROL's characters
        encoded = re.sub(_CONTROL, lambda m: quote(m[0], safe=""), relative_path)
    if re.search(r"[ ()<>]", encoded):
        return f"<{encoded.replace('<', '%3C').replace('>', '%3E')}>"
    return encoded


def _link(title: str, destination: str) -> str:
    escaped = _LINK_TEXT_SPECIALS.sub(r"\\\1", title)
    return f"[{escaped}]({destination})"


def _shorten(text: str, room: int) -> str:
    return text[: max(room - 1, 0)].rstrip() + _ELLIPSIS


def _fitted_title(title: str, destination: str, room: int) -> str:
    """``title``, or its longest prefix with an ellipsis, whose link fits in ``room``."""
    if len(_link(title, destination)) <= room:
        return title
    for keep in range(min(len(title), room), 0, -1):  # at most 150 tries of at most 150 chars
        shortened = _shorten(title, keep + 1)
        if len(_link(shortened, destination)) <= room:
            return shortened
    return _ELLIPSIS


def index_line(doc: MemoryDoc) -> str:
    """The index line of ``doc``: at most 150 characters unless its link alone is longer."""
    title = _clean(doc.title[: MAX_INDEX_LINE_CHARS * 2]) or doc.type
    destination = _destination(doc.relative_path)
    tail = _clean(doc.description[: MAX_INDEX_LINE_CHARS * 2]) or doc.type
    head = f"- {_link(title, destination)} — "
    if len(head) + len(tail) <= MAX_INDEX_LINE_CHARS:
        return head + tail
    if MAX_INDEX_LINE_CHARS - len(head) >= 2:
        return head + _shorten(tail, MAX_INDEX_LINE_CHARS - len(head))
    bare = f"- {_link(title, destination)}"
    if len(bare) <= MAX_INDEX_LINE_CHARS:
        return bare
    room = MAX_INDEX_LINE_CHARS - len("- ")
    if len(_link(_ELLIPSIS, destination)) > room:  # the path alone is too long: a short title
        return f"- {_link(_fitted_title(title, '', _SHORT_TITLE_CHARS), destination)}"
    return f"- {_link(_fitted_title(title, destination, room), destination)}"


def _warning(shown: int, total: int) -> str:
    return (
        f"> WARNING: {INDEX_FILE_NAME} is too large; only part of it was written "
        f"({shown} of {total} memories listed)."
    )


def _within_budget(lines: Sequence[str], reserve: int) -> list[str]:
    """Whole lines within the size budget: short lines first, then any, in their own order."""
    kept: set[int] = set()
    used = 0
    for short_only in (True, False):
        for number, line in enumerate(lines):
            if number in kept or (short_only and len(line) > MAX_INDEX_LINE_CHARS):
                continue
            if used + len(line) + 1 + reserve <= MAX_INDEX_CHARS:
                kept.add(number)
                used += len(line) + 1
    return [line for number, line in enumerate(lines) if number in kept]


def build_index_text(docs: Sequence[MemoryDoc], *, total: int | None = None) -> str:
    """The whole ``MEMORY.md`` text for ``docs`` (already in index order); empty for none.

    Only the first :data:`MAX_INDEX_LINES` documents can make a line, so a caller with many
    passes those and their ``total`` count."""
    total = len(docs) if total is None else max(total, len(docs))
    lines = [index_line(doc) for doc in docs[:MAX_INDEX_LINES]]
    size = sum(len(line) + 1 for line in lines)
    if total <= MAX_INDEX_LINES and size <= MAX_INDEX_CHARS:
        return "".join(f"{line}\n" for line in lines)
    reserve = len(_warning(total, total)) + 1
    kept = _within_budget(lines[: MAX_INDEX_LINES - 1], reserve)
    return "".join(f"{line}\n" for line in [*kept, _warning(len(kept), total)])


def write_index(root: Path, docs: Sequence[MemoryDoc], *, total: int | None = None) -> bool:
    """Write ``<root>/MEMORY.md`` atomically; False when it already held exactly this text.
    ``docs`` may be the first :data:`MAX_INDEX_LINES` of ``total``."""
    text = build_index_text(docs, total=total)
    path = root / INDEX_FILE_NAME
    try:
        if read_regular_bytes(path, limit=MAX_INDEX_CHARS * 4 + 1) == text.encode("utf-8"):
            return False
    except OSError:  # missing, or a FIFO or a device: replaced by the real index below
        pass
    atomic_write_text(path, text)
    return True
