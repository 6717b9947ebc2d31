"""Where memory lives: the project and user memory roots and the per-project state folder.

::

    <base>/memories/                      user memory root (cross-project)
    <base>/projects/<key>/                per-project state: meta.json, extract-cursor.json, ...
    <base>/projects/<key>/memory/         project memory root
    <project>/.cairn/memory/              project memory root when CAIRN_MEMORY_LOCAL=1

``<base>`` is ``CAIRN_MEMORY_BASE_DIR`` when set, else ``$CAIRN_HOME``. ``<key>`` names the nearest
git root (with ``CAIRN_MEMORY_PROJECT_SCOPE=workspace``, the workspace folder itself): the
project key of :func:`cairn.config.paths.project_key` in a base inside ``$CAIRN_HOME``; in a base
elsewhere, which another tool may share, the reference's key (every non-alphanumeric character
turned into ``-``), as Qwen Code names it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cairn.config.paths import cairn_home, find_git_root, project_dir, reference_project_key
from cairn.debug_log import get_logger
from cairn.values import Value

__all__ = [
    "BASE_DIR_ENV",
    "INDEX_FILE_NAME",
    "LOCAL_ENV",
    "PINNED_FOLDER",
    "PROJECT_SCOPE_ENV",
    "TYPE_FOLDERS",
    "MemoryRoots",
    "index_paths",
    "memory_base",
    "memory_roots",
    "namespace_key",
    "workspace_folder",
]

BASE_DIR_ENV = "CAIRN_MEMORY_BASE_DIR"
PROJECT_SCOPE_ENV = "CAIRN_MEMORY_PROJECT_SCOPE"
LOCAL_ENV = "CAIRN_MEMORY_LOCAL"
TYPE_FOLDERS = ("user", "feedback", "project", "reference")
PINNED_FOLDER = "pinned"  # hand-curated memories: read by Recall, never written by agents
INDEX_FILE_NAME = "MEMORY.md"

_GIT_ROOT_SCOPE = "git-root"
_WORKSPACE_SCOPE = "workspace"
_TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
_log = get_logger("MEMORY")
_warned_scopes: set[str] = set()


class MemoryRoots(Value):
    project: Path | None  # project memory root (None when unavailable)
    user: Path  # user memory root <base>/memories
    state_dir: Path  # per-project state dir: meta.json, extract-cursor.json, consolidation.lock

    @property
    def base(self) -> Path:
        """The memory base folder (the user root's parent)."""
        return self.user.parent


def memory_base(environ: Mapping[str, str] = os.environ) -> Path:
    """``CAIRN_MEMORY_BASE_DIR`` (``~`` expanded, resolved) if set, else the cairn home."""
    value = environ.get(BASE_DIR_ENV, "").strip()
    if value:
        return Path(value).expanduser().resolve()
    return cairn_home(environ)


def _project_scope(environ: Mapping[str, str]) -> str:
    value = environ.get(PROJECT_SCOPE_ENV, "").strip().lower()
    if value in ("", _GIT_ROOT_SCOPE, _WORKSPACE_SCOPE):
        return value or _GIT_ROOT_SCOPE
    if value not in _warned_scopes:
        _warned_scopes.add(value)
        _log.warning(
            f"{PROJECT_SCOPE_ENV}={value!r} is not 'git-root' or 'workspace'; using 'git-root'"
        )
    return _GIT_ROOT_SCOPE


def _key_folder(project_root: Path, environ: Mapping[str, str]) -> Path:
    workspace = project_root.resolve()
    if _project_scope(environ) == _WORKSPACE_SCOPE:
        return workspace
    return find_git_root(workspace) or workspace


def namespace_key(project_root: Path, environ: Mapping[str, str] = os.environ) -> str:
    """The reference's key of the project's key folder: the default PostgreSQL namespace, as
    it has always been (a database keeps the namespaces it was filled under)."""
    return reference_project_key(_key_folder(project_root, environ))


def _state_dir(base: Path, folder: Path, environ: Mapping[str, str]) -> Path:
    home = cairn_home(environ)
    if base == home or home in base.parents:  # cairn's own: the unambiguous key
        return project_dir(folder, base)
    return base / "projects" / reference_project_key(folder)


def workspace_folder(project_root: Path, *, environ: Mapping[str, str] = os.environ) -> Path:
    """The folder project memory belongs to (its git root, or the workspace itself with
    ``CAIRN_MEMORY_PROJECT_SCOPE=workspace``): memories' evidence paths are relative to it."""
    return _key_folder(project_root, environ)


def memory_roots(project_root: Path, *, environ: Mapping[str, str] = os.environ) -> MemoryRoots:
    """The memory roots of the project at ``project_root`` (a workspace folder).

    ``project`` is None when ``project_root`` is not an existing folder.
    """
    base = memory_base(environ)
    state_dir = _state_dir(base, _key_folder(project_root, environ), environ)
    project: Path | None = state_dir / "memory"
    if environ.get(LOCAL_ENV, "").strip().lower() in _TRUE_VALUES:
        project = project_root.resolve() / ".cairn" / "memory"
    if not project_root.is_dir():
        project = None
    return MemoryRoots(project=project, user=base / "memories", state_dir=state_dir)


INDEX_FOLDER = "recall-index"  # the saved search index: under the project state folder, and
# under the memory base for user memory


def index_paths(roots: MemoryRoots) -> tuple[Path, Path]:
    """Where the saved search indexes of ``roots`` are: the project's, the user's."""
    return (
        roots.state_dir / INDEX_FOLDER / "project.bin",
        roots.base / INDEX_FOLDER / "user.bin",
    )
