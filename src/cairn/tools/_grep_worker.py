"""The Python search behind ``grep_search`` when ripgrep is missing, run as its own process.

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` can take longer than the universe on one
line, and a thread running it cannot be stopped. Run as ``python -m cairn.tools._grep_worker
ARGS_JSON``, the search can be killed on cancel or when its time is up. It prints what ripgrep
prints with ``--null --line-number --with-filename``: ``path\\0line:text`` per match, paths
relative to the current folder, files in path order. Like ripgrep without ``--follow``, it does
not follow symbolic links.

Only the standard library, :mod:`cairn.tools._walk` and :mod:`cairn.tools.ignore` are imported:
it starts in milliseconds.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cairn.tools._walk import GlobPattern, iter_files
from cairn.tools.ignore import IgnoreRules

BINARY_SNIFF_BYTES = 8192  # bytes read from the start of a file to look for NUL bytes
MAX_WHOLE_FILE_BYTES = 16 << 20  # larger files are searched line by line, without a pre-check
# Regex syntax whose meaning depends on where the text ends, so a whole-file pre-check could
# miss a line's match: string anchors and lookarounds.
_LINE_SENSITIVE_SYNTAX = ("\\A", "\\Z", "\\z", "(?=", "(?!", "(?<")


@dataclass(frozen=True, slots=True)
class Searcher:
    """The pattern per line, and (when safe) over a whole file to skip files quickly."""

    line: re.Pattern[str]
    whole: re.Pattern[str] | None

    @classmethod
    def compile(cls, pattern: str) -> Searcher:
        line = re.compile(pattern)
        # Anchors and lookarounds can see past a line in the whole text; search per line only.
        exact_per_line = any(token in pattern for token in _LINE_SENSITIVE_SYNTAX)
        return cls(line, None if exact_per_line else re.compile(pattern, re.MULTILINE))


def search(
    pattern: str,
    target: Path,
    glob: str | None,
    limit: int,
    ignore: IgnoreRules | None = None,
) -> Iterator[tuple[str, int, str]]:
    """``(path, line number, line)`` of up to ``limit`` matches under ``target``."""
    searcher = Searcher.compile(pattern)
    matcher = GlobPattern.compile(glob, anywhere=True) if glob else None
    folder = target.is_dir()
    files = iter_files(target, follow_file_symlinks=False, ignore=ignore) if folder else [target]
    left = limit
    for path in files:
        if matcher is not None:
            relative = path.relative_to(target).as_posix() if folder else path.name
            if not matcher.matches(relative):
                continue
        for number, line in _file_matches(path, searcher, left):
            yield os.path.relpath(path), number, line
            left -= 1
            if left <= 0:
                return


def _file_matches(path: Path, searcher: Searcher, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` (line number, line) matches; unreadable and binary files have none."""
    try:
        with open(path, "rb") as handle:  # regular files only: iter_files yields no others
            data = handle.read(BINARY_SNIFF_BYTES)
            if b"\0" in data:
                return []
            if os.fstat(handle.fileno()).st_size > MAX_WHOLE_FILE_BYTES:
                return _first_matches(_decoded_lines(handle, data), searcher.line, limit)
            data += handle.read()
    except OSError:
        return []  # as ripgrep does
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if searcher.whole is not None and searcher.whole.search(text) is None:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return _first_matches(lines, searcher.line, limit)


def _decoded_lines(handle: BinaryIO, start: bytes) -> Iterator[str]:
    """The lines of a large file, read as they are needed."""
    pending = start
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            yield raw.decode("utf-8", errors="replace").removesuffix("\r")
    if pending:
        yield pending.decode("utf-8", errors="replace").removesuffix("\r")


def _first_matches(
    lines: Iterable[str], regex: re.Pattern[str], limit: int
) -> list[tuple[int, str]]:
    hits: list[tuple[int, str]] = []
    for number, line in enumerate(lines, start=1):
        if regex.search(line):
            hits.append((number, line))
            if len(hits) >= limit:
                break
    return hits


def main(argv: list[str]) -> int:
    options = json.loads(argv[0])
    out = sys.stdout.buffer
    rules = options.get("ignore")
    ignore = (
        IgnoreRules(
            Path(rules["root"]), gitignore=rules["gitignore"], cairnignore=rules["cairnignore"]
        )
        if rules
        else None
    )
    for path, number, line in search(
        options["pattern"], Path(options["target"]), options.get("glob"), options["limit"], ignore
    ):
        out.write(f"{path}\0{number}:{line}\n".encode("utf-8", errors="replace"))
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
