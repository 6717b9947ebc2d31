"""How the file tools show paths (relative to the workspace) and check what a path is before
they open it (a folder, a FIFO or a binary file is said as such, never read)."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from cairn.fsutil import file_kind, read_regular_bytes
from cairn.tools.base import ToolError

__all__ = [
    "BINARY_SNIFF_BYTES",
    "check_regular_file",
    "display_path",
    "folder_phrase",
    "looks_binary",
]

BINARY_SNIFF_BYTES = 8192  # bytes read from the start of a file to look for NUL bytes


def display_path(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace (POSIX style), or absolute when it lies outside."""
    try:
        relative = path.relative_to(workspace.resolve())
    except ValueError:
        return str(path)
    return relative.as_posix()


def folder_phrase(shown: str) -> str:
    """How a sentence names a displayed folder: "the workspace" for ".", else the path."""
    return "the workspace" if shown == "." else shown


def looks_binary(path: Path) -> bool:
    """True when the start of the file holds a NUL byte (how git and ripgrep spot binaries).

    Only for regular files (a FIFO would block): anything else is not looked into."""
    try:
        return b"\0" in read_regular_bytes(path, limit=BINARY_SNIFF_BYTES)
    except OSError:
        return False


async def check_regular_file(path: Path, shown: str, *, missing_ok: bool = False) -> bool:
    """True when ``path`` is a regular file, False when it is missing and ``missing_ok``.

    A folder, FIFO, device or socket is a :class:`ToolError` saying what it is: opening one
    would block the turn (a FIFO waits for a writer forever) or read without end.
    """
    try:
        info = await asyncio.to_thread(os.stat, path)
    except FileNotFoundError:
        if missing_ok:
            return False
        raise ToolError(f"File not found: {shown}") from None
    except OSError as exc:
        raise ToolError(f"Could not read {shown}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory, not a file. Use list_directory to see it.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(
            f"{shown} is {file_kind(info.st_mode)}, not a regular file; the file tools "
            "only read and write regular files."
        )
    return True
