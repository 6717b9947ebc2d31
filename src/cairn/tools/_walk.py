"""Glob patterns and the file walk shared by ``glob``, ``grep_search`` and permission rules."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.tools._patterns import translate
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.tools.ignore import IgnoreRules

__all__ = ["SKIPPED_DIRS", "GlobPattern", "expand_braces", "iter_files"]

# Folders never walked into: version control, dependencies and caches.
SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__"})
MAX_BRACE_EXPANSIONS = 64  # alternatives one `{a,b}{c,d}...` pattern may expand to


class GlobPattern(Value):
    """A compiled glob matched against POSIX paths.

    ``**`` matches any number of folders, ``*`` and ``?`` stay inside one path segment,
    ``[...]`` is a character class and ``{a,b}`` lists alternatives. With ``anywhere`` set, a
    pattern without a ``/`` matches the file name at any depth (as in ``.gitignore`` or rg).
    """

    pattern: str
    regex: re.Pattern[str]
    basename_only: bool

    @classmethod
    def compile(cls, pattern: str, *, anywhere: bool = False) -> GlobPattern:
        body = pattern[2:] if pattern.startswith("./") else pattern
        alternatives = expand_braces(body)
        regex = re.compile("|".join(f"(?:{translate(alt, git=False)})" for alt in alternatives))
        return cls(pattern, regex, basename_only=anywhere and "/" not in body)

    def matches(self, posix_path: str) -> bool:
        target = posix_path.rsplit("/", 1)[-1] if self.basename_only else posix_path
        return self.regex.fullmatch(target) is not None


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``["abd", "acd"]``; at most :data:`MAX_BRACE_EXPANSIONS` results."""
    done: list[str] = []
    pending = [pattern]
    while pending and len(done) < MAX_BRACE_EXPANSIONS:
        current = pending.pop()
        group = _first_brace_group(current)
        if group is None:
            done.append(current)
            continue
        start, end, options = group
        head, tail = current[:start], current[end + 1 :]
        pending.extend(head + option + tail for option in reversed(options))
    return done


def _first_brace_group(pattern: str) -> tuple[int, int, list[str]] | None:
    """The first ``{...}`` holding a top-level comma: (start, end, options)."""
    search_from = 0
    while (start := pattern.find("{", search_from)) != -1:
        depth = 0
        options: list[str] = []
        piece_start = start + 1
        for index in range(start, len(pattern)):
            char = pattern[index]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    if options:
                        options.append(pattern[piece_start:index])
                        return start, index, options
                    break
            elif char == "," and depth == 1:
                options.append(pattern[piece_start:index])
                piece_start = index + 1
        search_from = start + 1
    return None


def iter_files(
    base: Path,
    should_stop: Callable[[], bool] | None = None,
    *,
    follow_file_symlinks: bool = True,
    ignore: IgnoreRules | None = None,
) -> Iterator[Path]:
    """Regular files under ``base`` depth first in name order, skipping :data:`SKIPPED_DIRS` and
    what ``ignore`` ignores (``.gitignore``, ``.cairnignore``; :mod:`cairn.tools.ignore`).

    Symlinked folders are not followed (no cycles); symlinked files are yielded unless
    ``follow_file_symlinks`` is false; FIFOs, sockets and devices never are (opening a FIFO
    blocks); unreadable folders are skipped. A ``base`` inside an ignored folder is walked:
    naming a folder is asking for it.
    """
    prefix = _prefix_in(base, ignore)
    rules = ignore if prefix is not None else None
    stack = [(iter(_sorted_entries(base)), prefix or "")]
    while stack:
        if should_stop is not None and should_stop():
            return
        entries, folder = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        relative = f"{folder}/{entry.name}" if folder else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                if entry.name in SKIPPED_DIRS:
                    continue
                if rules is not None and rules.entry_ignored(relative, True):
                    continue
                stack.append((iter(_sorted_entries(Path(entry.path))), relative))
            elif entry.is_file(follow_symlinks=follow_file_symlinks) and (
                rules is None or not rules.entry_ignored(relative, False)
            ):
                yield Path(entry.path)
        except OSError:
            continue


def _prefix_in(base: Path, ignore: IgnoreRules | None) -> str | None:
    """``base`` relative to the rules' root, or ``None`` when the rules do not apply to it."""
    if ignore is None or not ignore.active:
        return None
    try:
        relative = base.resolve().relative_to(ignore.root).as_posix()
    except (ValueError, OSError):
        return None
    return "" if relative == "." else relative


def _sorted_entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []
