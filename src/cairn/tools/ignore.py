"""``.gitignore`` and ``.cairnignore`` rules for the file tools (``glob``, ``grep_search``,
``list_directory``, ``read_file``).

The rules are git's: the ``.gitignore`` of every folder from the project root down (a deeper
file's patterns win over a higher one's; within a file the last matching line wins), the
repository's ``.git/info/exclude``, ``!`` to re-include, a trailing ``/`` for folders only, a
``/`` at the start or in the middle to anchor a pattern to its file's folder, ``*``, ``?``,
``[...]`` and ``**``, and no re-including a file whose folder is excluded. ``.cairnignore``, at
the project root, uses the same syntax for what the agent should not look at even when git
tracks it. ``.gitignore`` files count whether or not the folder is a git repository. Tested
against ``git check-ignore``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cairn.tools._patterns import translate

__all__ = ["CAIRNIGNORE", "GITIGNORE", "IgnoreRules", "compile_pattern", "parse_ignore_lines"]

GITIGNORE = ".gitignore"
CAIRNIGNORE = ".cairnignore"
MAX_IGNORE_FILE_BYTES = 1 << 20  # larger ignore files are read up to this size


@dataclass(frozen=True, slots=True)
class IgnorePattern:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    source: str  # the line as written, for messages


def parse_ignore_lines(text: str) -> list[tuple[str, bool, bool, bool]]:
    """``(body, negated, dir_only, anchored)`` of each pattern line of an ignore file."""
    patterns = []
    for raw in text.splitlines():
        line = _strip_trailing_spaces(raw)
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/") and not line.endswith("\\/")
        if dir_only:
            line = line[:-1]  # only one: git reads "a//" as "a/" that must be a folder
        if not line:
            continue
        anchored = "/" in line
        patterns.append((line.removeprefix("/"), negated, dir_only, anchored))
    return patterns


def _strip_trailing_spaces(line: str) -> str:
    line = line.rstrip("\r\n")
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    return line


def compile_pattern(body: str, *, anchored: bool) -> re.Pattern[str]:
    """The regex a pattern body matches against a path relative to its file's folder."""
    translated = translate(body, git=True)
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(f"{prefix}{translated}", re.DOTALL)


@dataclass
class _Level:
    """The patterns of one ignore file, relative to the folder it applies from."""

    folder: str  # POSIX path relative to the root ("" for the root itself)
    patterns: list[IgnorePattern] = field(default_factory=list)


class IgnoreRules:
    """What the file tools skip under ``root``; ignore files are read as folders are visited."""

    def __init__(self, root: Path, *, gitignore: bool = True, cairnignore: bool = True) -> None:
        self.root = root.resolve()
        self.gitignore = gitignore
        self.cairnignore = cairnignore
        self._levels: dict[str, _Level | None] = {}
        self._global: list[_Level] = []
        if gitignore:
            for exclude in _repository_excludes(self.root):
                self._global.append(_level("", _read(exclude)))
        self._cairn = _level("", _read(self.root / CAIRNIGNORE)) if cairnignore else None

    @property
    def active(self) -> bool:
        return self.gitignore or self.cairnignore

    def ignored(self, path: Path, *, is_dir: bool | None = None) -> bool:
        """Whether ``path`` (absolute, or relative to the root), or a folder above it inside the
        root, is ignored. Paths outside the root are never ignored."""
        relative = self._relative(path)
        if relative is None or not relative:
            return False
        parts = relative.split("/")
        for depth in range(1, len(parts)):
            if self._matches("/".join(parts[:depth]), True):
                return True
        if is_dir is None:
            is_dir = (self.root / relative).is_dir()
        return self._matches(relative, is_dir)

    def ignored_below(self, base: Path, path: Path, *, is_dir: bool = False) -> bool:
        """Whether ``path`` is ignored counting only the folders below ``base`` (a search's own
        folder: naming an ignored folder is asking for it)."""
        start, target = self._relative(base), self._relative(path)
        if start is None or target is None or not target:
            return False
        prefix = f"{start}/" if start else ""
        if not target.startswith(prefix):
            return False
        parts = target[len(prefix) :].split("/")
        for depth in range(1, len(parts)):
            if self._matches(prefix + "/".join(parts[:depth]), True):
                return True
        return self._matches(target, is_dir)

    def entry_ignored(self, relative: str, is_dir: bool) -> bool:
        """For a walk that already skips ignored folders: ``relative`` itself (its folders are
        known not to be ignored)."""
        return self._matches(relative, is_dir)

    def cairn_ignored(self, path: Path) -> bool:
        """Whether ``.cairnignore`` alone excludes ``path`` (or a folder above it)."""
        relative = self._relative(path)
        if self._cairn is None or not relative:
            return False
        parts = relative.split("/")
        for depth in range(1, len(parts) + 1):
            is_dir = depth < len(parts) or (self.root / relative).is_dir()
            if _decide([self._cairn], "/".join(parts[:depth]), is_dir):
                return True
        return False

    def _relative(self, path: Path) -> str | None:
        if not path.is_absolute():
            return _posix(path)
        for candidate in (path, path.resolve()):
            try:
                return _posix(candidate.relative_to(self.root))
            except ValueError:
                continue
        return None

    def _matches(self, relative: str, is_dir: bool) -> bool:
        levels = [*self._global, *self._gitignores_for(relative)]
        if self._cairn is not None:
            levels.append(self._cairn)
        return _decide(levels, relative, is_dir)

    def _gitignores_for(self, relative: str) -> list[_Level]:
        if not self.gitignore:
            return []
        found = []
        folders = [""] + [
            "/".join(relative.split("/")[:i]) for i in range(1, relative.count("/") + 1)
        ]
        for folder in folders:
            level = self._levels.get(folder, ...)
            if level is ...:
                level = self._load(folder)
            if level is not None:
                found.append(level)
        return found

    def _load(self, folder: str) -> _Level | None:
        path = self.root / folder / GITIGNORE if folder else self.root / GITIGNORE
        text = _read(path)
        level = _level(folder, text) if text else None
        self._levels[folder] = level
        return level


def _posix(relative: Path) -> str:
    text = relative.as_posix()
    return "" if text == "." else text.strip("/")


def _decide(levels: Iterable[_Level], relative: str, is_dir: bool) -> bool:
    """git's answer for one path: the last matching pattern, deepest file last, decides."""
    ignored = False
    for level in levels:
        if level.folder:
            if not relative.startswith(level.folder + "/"):
                continue
            local = relative[len(level.folder) + 1 :]
        else:
            local = relative
        for pattern in level.patterns:
            if pattern.dir_only and not is_dir:
                continue
            if pattern.regex.fullmatch(local):
                ignored = not pattern.negated
    return ignored


def _level(folder: str, text: str) -> _Level:
    patterns = [
        IgnorePattern(compile_pattern(body, anchored=anchored), negated, dir_only, body)
        for body, negated, dir_only, anchored in parse_ignore_lines(text)
    ]
    return _Level(folder, patterns)


def _read(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_IGNORE_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _repository_excludes(root: Path) -> Sequence[Path]:
    """The repository's ``info/exclude`` (when ``root`` is a repository's top folder)."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return [dot_git / "info" / "exclude"]
    if dot_git.is_file():
        text = _read(dot_git).strip()
        if text.startswith("gitdir:"):
            git_dir = Path(os.path.join(root, text.removeprefix("gitdir:").strip()))
            common = _read(git_dir / "commondir").strip()
            return [(git_dir / common if common else git_dir) / "info" / "exclude"]
    return []
