"""Context files (``AGENTS.md``, ``CAIRN.md``) appended to the system prompt.

Collected from ``$CAIRN_HOME`` first, then from the git root down to the working directory, so
the most specific instructions come last.

A context file of the project is read only when it resolves inside the project: a repository's
``AGENTS.md`` linked to ``../secret`` or ``/proc/self/environ`` would put a file from outside
the workspace into every request. The check is made on the file descriptor the text is read
from (:func:`_read`), so a link swapped in after the check leads nowhere. The files of
``$CAIRN_HOME`` are yours and are read wherever they lead. A file refused is a warning, which
the session shows the user once as a notice. A name (``context.fileName``) is a file, or a
relative path, inside each folder: an absolute name or one with ``..`` is refused wherever it
is set.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

from cairn.config.paths import cairn_home, find_git_root
from cairn.fsutil import NotRegularFile
from cairn.values import Value

__all__ = ["ContextFile", "collect_context_files", "render_context_files"]

MAX_CONTEXT_FILE_BYTES = 256 * 1024  # a larger context file is skipped with a warning


class ContextFile(Value):
    path: Path
    text: str


def collect_context_files(
    cwd: Path, names: str | list[str], *, home: Path | None = None
) -> tuple[list[ContextFile], list[str]]:
    """Return the context files found and a warning for each one that could not be read."""
    warnings: list[str] = []
    file_names = _usable_names([names] if isinstance(names, str) else list(names), warnings)
    cwd = cwd.resolve()
    root = find_git_root(cwd) or cwd
    user_folder = home or cairn_home()
    chain: list[Path] = []
    current = cwd
    while True:
        chain.append(current)
        if current == root or current.parent == current:
            break
        current = current.parent
    folders = [user_folder, *reversed(chain)]

    found: list[ContextFile] = []
    seen: set[Path] = set()
    for folder in folders:
        within = None if folder == user_folder else root
        for name in file_names:
            path = folder / name
            try:
                if not path.exists():
                    continue
                data, real = _read(path, within)
            except NotRegularFile as exc:  # a FIFO would block every session's start
                warnings.append(f"{path}: context file is {exc.kind}, not a file; skipped")
                continue
            except _Outside as exc:
                warnings.append(
                    f"{path}: context file leads outside the project ({exc.real}); skipped"
                )
                continue
            except OSError as exc:
                warnings.append(f"{path}: cannot read context file ({exc.strerror})")
                continue
            if real in seen:
                continue
            seen.add(real)
            if len(data) > MAX_CONTEXT_FILE_BYTES:
                warnings.append(f"{path}: context file larger than 256 KiB is skipped")
                continue
            text = data.decode("utf-8", errors="replace")
            if text.strip():
                found.append(ContextFile(path, text.strip()))
    return found, warnings


class _Outside(Exception):
    """The file opened is not inside the project (``real``: where it is)."""

    def __init__(self, real: Path | str) -> None:
        super().__init__(str(real))
        self.real = real


def _read(path: Path, within: Path | None) -> tuple[bytes, Path]:
    """The bytes of the regular file at ``path`` and its real path, read from the one
    descriptor that every check is made on: its type, and with ``within``, that the file opened
    lies inside it (a check of the path followed by a read of it would let a link swapped in
    between lead the read elsewhere). Raises :class:`NotRegularFile`, :class:`_Outside` or
    ``OSError``."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):  # checked before opening: opening a device can have effects
        raise NotRegularFile(path, mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise NotRegularFile(path, opened.st_mode)
        real = _opened_path(fd, path, opened)
        if real is None:
            raise _Outside(f"{path} changed while it was opened")
        if within is not None and not real.is_relative_to(within):
            raise _Outside(real)
        return handle.read(MAX_CONTEXT_FILE_BYTES + 1), real


def _opened_path(fd: int, path: Path, opened: os.stat_result) -> Path | None:
    """Where the file open as ``fd`` is: the kernel's name for the descriptor (Linux), else the
    resolved ``path`` if it still is that same file (``None`` when it is not)."""
    try:
        named = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        named = ""
    if named.startswith("/") and not named.endswith(" (deleted)"):
        return Path(named)
    resolved = path.resolve()
    try:
        same = os.path.samestat(os.stat(resolved), opened)
    except OSError:
        return None
    return resolved if same else None


def _usable_names(names: list[str], warnings: list[str]) -> list[str]:
    """The names that stay inside the folder they are looked up in."""
    usable: list[str] = []
    for name in names:
        forms = (PurePosixPath(name), PureWindowsPath(name))
        if not name.strip() or any(p.is_absolute() or ".." in p.parts or p.anchor for p in forms):
            warnings.append(
                f"context file name {name!r} is ignored: a name is a file inside each folder "
                "(no absolute path, no `..`)"
            )
            continue
        usable.append(name)
    return usable


def render_context_files(files: list[ContextFile]) -> str:
    blocks = [
        f"--- Context from: {f.path} ---\n{f.text}\n--- End of Context from: {f.path} ---"
        for f in files
    ]
    return "\n\n".join(blocks)
