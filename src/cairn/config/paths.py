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

A project key is the project's resolved path made readable (every character that is not a
letter or a digit becomes ``-``: the reference's key) followed by ``-`` and 12 hex digits of the
path's SHA-256, so ``/x/a-b`` and ``/x/a.b`` never share a folder. A folder an earlier cairn kept
under the reference's key alone is moved to the new name the first time it is needed
(:mod:`cairn.config.project_folders`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

__all__ = [
    "FolderLog",
    "cairn_home",
    "chats_dir",
    "debug_dir",
    "find_git_root",
    "folder_log",
    "log_folder_moves_to",
    "project_dir",
    "project_key",
    "project_root",
    "reference_project_key",
    "sanitize_path_key",
    "user_settings_path",
]

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")
KEY_HASH_CHARS = 12  # hex digits of the path's SHA-256 that end a project key
MAX_KEY_SLUG_CHARS = 200  # readable part of a key kept (its end): a key must fit a file name


class FolderLog(Protocol):
    def info(self, message: str) -> None: ...
    def warning(self, message: str) -> None: ...


_folder_logs: list[FolderLog] = []


def log_folder_moves_to(log: FolderLog) -> None:
    """Where moves of project folders are logged: the debug log registers itself when it is
    imported (it sits a layer above this one)."""
    _folder_logs[:] = [log]


def folder_log() -> FolderLog | None:
    return _folder_logs[0] if _folder_logs else None


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
    """``<readable path>-<12 hex digits of its SHA-256>``: unique per resolved path."""
    path = _key_text(root)
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()
    return f"{sanitize_path_key(path)[-MAX_KEY_SLUG_CHARS:]}-{digest[:KEY_HASH_CHARS]}"


def reference_project_key(root: Path) -> str:
    """The reference's key (and earlier cairn's): ambiguous, as ``/x/a-b`` and ``/x/a.b``
    share it. Kept for folders shared with another tool and for migrating old ones."""
    return sanitize_path_key(_key_text(root))


def _key_text(root: Path) -> str:
    text = str(root.resolve())
    return text.lower() if os.name == "nt" else text


def project_dir(root: Path, base: Path | None = None) -> Path:
    """``<base>/projects/<key>``: per-project state (chats, checkpoints, memory state), where
    ``base`` is ``$CAIRN_HOME`` unless given. A folder of the earlier key layout is migrated
    here first (once; a stat when there is none)."""
    folder = (base or cairn_home()) / "projects" / project_key(root)
    if not folder.exists():
        legacy = folder.parent / reference_project_key(root)
        if legacy.is_dir():
            from cairn.config.project_folders import migrate_reference_folder

            migrate_reference_folder(root.resolve(), legacy, folder)
    return folder


def chats_dir(root: Path) -> Path:
    return project_dir(root) / "chats"


def debug_dir() -> Path:
    return cairn_home() / "debug"
