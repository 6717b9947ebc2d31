"""Context files (``AGENTS.md``, ``CAIRN.md``) appended to the system prompt.

Collected from ``$CAIRN_HOME`` first, then from the git root down to the working directory, so
the most specific instructions come last.

A context file of the project is read only when it resolves inside the project: a repository's
``AGENTS.md`` linked to ``../secret`` or ``/proc/self/environ`` would put a file from outside
the workspace into every request. The files of ``$CAIRN_HOME`` are yours and are read wherever
they lead. A name (``context.fileName``) is a file, or a relative path, inside each folder: an
absolute name or one with ``..`` is refused wherever it is set.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from cairn.config.paths import cairn_home, find_git_root
from cairn.fsutil import NotRegularFile, read_regular_bytes
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
                if not path.exists() or path.resolve() in seen:
                    continue
                resolved = path.resolve()
                seen.add(resolved)
                if within is not None and not resolved.is_relative_to(within):
                    warnings.append(
                        f"{path}: context file leads outside the project ({resolved}); skipped"
                    )
                    continue
                data = read_regular_bytes(resolved, limit=MAX_CONTEXT_FILE_BYTES + 1)
            except NotRegularFile as exc:  # a FIFO would block every session's start
                warnings.append(f"{path}: context file is {exc.kind}, not a file; skipped")
                continue
            except OSError as exc:
                warnings.append(f"{path}: cannot read context file ({exc.strerror})")
                continue
            if len(data) > MAX_CONTEXT_FILE_BYTES:
                warnings.append(f"{path}: context file larger than 256 KiB is skipped")
                continue
            text = data.decode("utf-8", errors="replace")
            if text.strip():
                found.append(ContextFile(path, text.strip()))
    return found, warnings


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
