"""Where cairn keeps things on disk.

::

    $CAIRN_HOME (default ~/.cairn)
      settings.json
      memories/                       user-scope memory root
      projects/<project-key>/
        meta.json extract-cursor.json consolidation.lock
        chats/<session-id>.jsonl
        memory/                       project memory root
      debug/<session-id>.txt, debug/latest
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "cairn_home",
    "chats_dir",
    "debug_dir",
    "find_git_root",
    "project_dir",
    "project_key",
    "project_root",
    "sanitize_path_key",
    "user_settings_path",
]

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


def cairn_home(environ: Mapping[str, str] = os.environ) -> Path:
    """``$CAIRN_HOME`` if set, else ``~/.cairn`` (a temp-dir fallback when there is no home)."""
    env = environ.get("CAIRN_HOME", "").strip()
    if env:
        return Path(env).expanduser().resolve()
    try:
        return Path.home() / ".cairn"
    except RuntimeError:  # no home directory (some containers)
        import tempfile

        return Path(tempfile.gettempdir()) / ".cairn"


def user_settings_path() -> Path:
    return cairn_home() / "settings.json"


def find_git_root(start: Path) -> Path | None:
    """The nearest ancestor of ``start`` (itself included) holding a ``.git`` file or folder."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def project_root(cwd: Path) -> Path:
    """The project a working directory belongs to: its git root, else the directory itself."""
    return find_git_root(cwd) or cwd.resolve()


def sanitize_path_key(path: Path | str) -> str:
    """Every non-alphanumeric character becomes ``-`` (the reference's project-key rule)."""
    text = str(path)
    if os.name == "nt":
        text = text.lower()
    return _NON_ALNUM.sub("-", text)


def project_key(root: Path) -> str:
    return sanitize_path_key(root.resolve())


def project_dir(root: Path, base: Path | None = None) -> Path:
    """``<base>/projects/<key>``: per-project state (chats, memory state files)."""
    return (base or cairn_home()) / "projects" / project_key(root)


def chats_dir(root: Path) -> Path:
    return project_dir(root) / "chats"


def debug_dir() -> Path:
    return cairn_home() / "debug"
