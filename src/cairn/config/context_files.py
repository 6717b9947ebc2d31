"""Context files (``AGENTS.md``, ``CAIRN.md``) appended to the system prompt.

Collected from ``$CAIRN_HOME`` first, then from the git root down to the working directory, so
the most specific instructions come last.
"""

from __future__ import annotations

from pathlib import Path

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
    file_names = [names] if isinstance(names, str) else list(names)
    cwd = cwd.resolve()
    root = find_git_root(cwd) or cwd
    folders = [home or cairn_home()]
    chain: list[Path] = []
    current = cwd
    while True:
        chain.append(current)
        if current == root or current.parent == current:
            break
        current = current.parent
    folders += reversed(chain)

    found: list[ContextFile] = []
    warnings: list[str] = []
    seen: set[Path] = set()
    for folder in folders:
        for name in file_names:
            path = folder / name
            try:
                if not path.exists() or path.resolve() in seen:
                    continue
                seen.add(path.resolve())
                data = read_regular_bytes(path, limit=MAX_CONTEXT_FILE_BYTES + 1)
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


def render_context_files(files: list[ContextFile]) -> str:
    blocks = [
        f"--- Context from: {f.path} ---\n{f.text}\n--- End of Context from: {f.path} ---"
        for f in files
    ]
    return "\n\n".join(blocks)
