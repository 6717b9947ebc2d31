"""Reading extension files safely: regular files only, size-capped, UTF-8, found without
following a folder forever; and what a command or skill file grants (``allowed-tools``).

A file that cannot be read this way is skipped with a warning naming it (the caller turns the
:class:`ExtensionFileError` into one); nothing here raises for a folder that is missing.

It sits in ``config/``, below :mod:`cairn.extensions`, because the trusted-folders check
(:mod:`cairn.config.trust`) must read a project's files exactly as the loaders do: which files
(:func:`walk_files`, :func:`skill_files`, the same caps), their text, their front matter, their
grant (:func:`granted_tools`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from cairn.config.extension_folders import MAX_DEPTH, Folder
from cairn.config.frontmatter import FrontMatter, FrontMatterError, field_list

__all__ = [
    "COMMAND_SUFFIXES",
    "GRANT_KEY",
    "MAX_EXTENSION_FILE_BYTES",
    "MAX_FILES_PER_FOLDER",
    "MAX_SKILLS_PER_FOLDER",
    "SKILL_FILE",
    "ExtensionFileError",
    "granted_tools",
    "load_each",
    "read_extension_file",
    "read_grant",
    "skill_files",
    "walk_files",
]

MAX_EXTENSION_FILE_BYTES = 1024 * 1024  # a command, skill or agent file larger than this is skipped
MAX_FILES_PER_FOLDER = 2000  # files looked at under one commands/skills/agents folder
MAX_SKILLS_PER_FOLDER = 500  # skill folders looked at under one skills folder
COMMAND_SUFFIXES = (".md", ".toml")  # of command files: Markdown (Claude Code), TOML (Qwen Code)
SKILL_FILE = "SKILL.md"
GRANT_KEY = "allowed-tools"  # front matter key of the tools a command or skill runs unasked
_T = TypeVar("_T")


class ExtensionFileError(Exception):
    """A file that cannot be used; the message says why (without the file's name)."""


def read_extension_file(path: Path) -> str:
    """The text of ``path``: a regular UTF-8 file of at most :data:`MAX_EXTENSION_FILE_BYTES`."""
    from cairn.fsutil import NotRegularFile, read_regular_bytes

    try:
        data = read_regular_bytes(path, limit=MAX_EXTENSION_FILE_BYTES + 1)
    except NotRegularFile:
        raise ExtensionFileError("it is not a regular file") from None
    except OSError as exc:
        raise ExtensionFileError(f"it cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_EXTENSION_FILE_BYTES:
        raise ExtensionFileError(f"it is larger than {MAX_EXTENSION_FILE_BYTES // 1024} KB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ExtensionFileError("it is not UTF-8 text") from None


def load_each(
    folder: Folder, paths: Iterable[Path], load: Callable[[Path], _T | None]
) -> tuple[list[_T], list[str]]:
    """What ``load`` makes of each file of ``folder`` (``None``: not one, passed over) and a
    warning naming each file it refuses with :class:`ExtensionFileError` or
    :class:`FrontMatterError`."""
    loaded: list[_T] = []
    warnings: list[str] = []
    for path in paths:
        try:
            item = load(path)
        except (ExtensionFileError, FrontMatterError) as exc:
            warnings.append(f"{folder.shown(path)} is skipped: {exc}.")
            continue
        if item is not None:
            loaded.append(item)
    return loaded, warnings


def granted_tools(front: FrontMatter) -> tuple[str, ...]:
    """The tools a command or skill file's front matter lets it run without asking."""
    return field_list(front.fields, GRANT_KEY) or ()


def read_grant(path: Path) -> tuple[str, ...]:
    """What the command or skill file ``path`` grants, read as its loader reads it (a TOML
    command grants nothing); :class:`ExtensionFileError` or :class:`FrontMatterError` when the
    loader would skip the file."""
    from cairn.config.frontmatter import split_front_matter

    text = read_extension_file(path)
    if path.suffix == ".toml":
        return ()
    return granted_tools(split_front_matter(text))


def skill_files(root: Path, limit: int = MAX_SKILLS_PER_FOLDER) -> list[Path]:
    """The ``SKILL.md`` of each skill folder under ``root`` (links followed), in name order,
    among its first ``limit`` entries that are not hidden."""
    try:
        entries = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    except OSError:
        return []
    return [
        entry / SKILL_FILE
        for entry in entries[:limit]
        if entry.is_dir() and (entry / SKILL_FILE).exists()
    ]


def walk_files(
    root: Path, suffixes: tuple[str, ...], limit: int = MAX_FILES_PER_FOLDER
) -> Iterator[Path]:
    """Files under ``root`` ending in one of ``suffixes``, sorted, at most ``limit``; hidden
    entries are skipped and a folder reached twice through links is not searched again."""
    if not root.is_dir():
        return
    seen: set[tuple[int, int]] = set()
    count = 0
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            info = folder.stat()
            entries = sorted(os.scandir(folder), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        files: list[Path] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                mode = entry.stat().st_mode  # follows links: a linked file or folder counts
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if depth < MAX_DEPTH:
                    stack.append((Path(entry.path), depth + 1))
            elif entry.name.endswith(suffixes):
                files.append(Path(entry.path))
        for path in reversed(files):
            count += 1
            if count > limit:
                return
            yield path
