"""``cairn memory list`` at any size: one aligned line per memory, printed as it is read.

A table renderer lays out every row before it prints the first (1.6 ms a row: 100,000 memories
took minutes before a line appeared), so the listing is plain columns instead, padded to fixed
widths and written a page at a time: the first page appears as soon as the store is open, and
``--limit`` stops after the newest N. On a terminal the title is shortened to fit the width;
into a pipe every field is written whole.
"""

from __future__ import annotations

import itertools
import shutil
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO

from cairn.memory.document import MemoryDoc
from cairn.memory.recall.render import age_text, memory_age_days

__all__ = ["PAGE_ROWS", "print_memories"]

PAGE_ROWS = 200  # rows written (and flushed) at once
_HEADER = ("Type", "Scope", "Age", "Title", "Path")
_TYPE_WIDTH = 9  # "reference"
_SCOPE_WIDTH = 7  # "project"
_AGE_WIDTH = 14  # "1095 days ago"
_MIN_TITLE = 20
_GAP = "  "


def _fit(text: str, width: int) -> str:
    text = " ".join(text.split())  # a title is one line
    return text if len(text) <= width else text[: width - 1] + "…"


def _title_width(docs: list[MemoryDoc], terminal: int | None) -> int:
    """The title column: the page's longest title, cut to what a terminal has room for."""
    longest = max((len(doc.title) for doc in docs), default=len("Title"))
    if terminal is None:
        return longest
    fixed = _TYPE_WIDTH + _SCOPE_WIDTH + _AGE_WIDTH + 4 * len(_GAP)
    paths = max((len(doc.relative_path) for doc in docs), default=0)
    return max(_MIN_TITLE, min(longest, terminal - fixed - paths))


def _line(cells: tuple[str, str, str, str, str], title_width: int) -> str:
    kind, scope, age, title, path = cells
    return _GAP.join(
        (
            kind.ljust(_TYPE_WIDTH),
            scope.ljust(_SCOPE_WIDTH),
            age.ljust(_AGE_WIDTH),
            _fit(title, title_width).ljust(title_width),
            path,
        )
    )


def _pages(docs: Iterable[MemoryDoc]) -> Iterator[list[MemoryDoc]]:
    iterator = iter(docs)
    while page := list(itertools.islice(iterator, PAGE_ROWS)):
        yield page


def print_memories(
    docs: Iterable[MemoryDoc], *, now: float, total: int, limit: int = 0, out: TextIO | None = None
) -> int:
    """Write ``docs`` (newest first) a page at a time; the number written. With ``limit``, the
    first ``limit`` only, and a last line saying how many more there are."""
    stream = out if out is not None else sys.stdout
    terminal = shutil.get_terminal_size().columns if stream.isatty() else None
    wanted = itertools.islice(docs, limit) if limit > 0 else docs
    written = 0
    width = 0
    for page in _pages(wanted):
        width = max(width, _title_width(page, terminal))  # a column never narrows again
        lines = [_line(_HEADER, width)] if not written else []
        lines += [
            _line(
                (doc.type, doc.scope, age_text(memory_age_days(doc.mtime, now)), doc.title,
                 doc.relative_path),
                width,
            )
            for doc in page
        ]  # fmt: skip
        stream.write("\n".join(line.rstrip() for line in lines) + "\n")
        stream.flush()
        written += len(page)
    if limit > 0 and total > written:
        stream.write(f"… {total - written:,} more (of {total:,}): --limit 0 lists them all\n")
    return written
