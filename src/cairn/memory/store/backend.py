"""Where memories are stored: files on this machine (the default), or PostgreSQL.

Every backend gives the memory code the same thing, memory folders to read (its
:class:`~cairn.memory.paths.MemoryRoots`), so Recall, Extract, Dream and Forget never know
which one holds the memory. The difference is in the writes and the locks:

- :class:`FileBackend`: the folders are the memory. A write section holds the folder's file
  lock; Dream's lock is ``consolidation.lock`` with the holder's process id.
- :class:`~cairn.memory.store.postgres.backend.PostgresBackend`: the folders mirror a
  namespace of a PostgreSQL database. A write section is also one transaction under the
  namespace's advisory lock, and Dream's lock is a session advisory lock.

:func:`open_backend` picks one from ``memory.backend``.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cairn.config.settings import Settings
from cairn.memory.paths import MemoryRoots, memory_roots, namespace_key

if TYPE_CHECKING:
    from cairn.memory.document import MemoryDoc
    from cairn.memory.store.memory_store import VectorSync

__all__ = [
    "TENANTS_FOLDER",
    "TENANT_NAME",
    "TENANT_RULE",
    "DreamLock",
    "FileBackend",
    "MemoryBackend",
    "MemoryBackendError",
    "WarmUpSearch",
    "open_backend",
    "tenant_environ",
    "tenant_problem",
]

TENANTS_FOLDER = "tenants"  # under the memory base: one memory base per daemon tenant
# A folder name (never . or ..) in lower case: on a case-insensitive file system `Acme` and
# `acme` would be one folder for two tenants, so no name may differ from another in case only.
TENANT_NAME = re.compile(r"[a-z0-9_@-][a-z0-9._@-]{0,127}")
TENANT_RULE = "1-128 characters of lower-case a-z, 0-9 and . _ @ - (not starting with .)"


def tenant_problem(name: str) -> str | None:
    """Why ``name`` is not a daemon tenant's name (see :data:`TENANT_NAME`), or ``None``. Every
    place that reads a tenant name (the daemon's header, ``cairn memory --tenant``, the memory
    base, the recordings' folder, a tenant's runtime) decides with this."""
    if TENANT_NAME.fullmatch(name):
        return None
    if TENANT_NAME.fullmatch(name.lower()):
        return f"{name!r} has capitals: a tenant name is lower-case ({name.lower()!r})"
    return f"{name!r} is not a tenant name: {TENANT_RULE}"


class MemoryBackendError(RuntimeError):
    """The configured memory backend cannot be used (no driver, no database, refused)."""


class DreamLock(Protocol):
    """Dream's cross-process lock (one Dream per project at a time)."""

    def holder(
        self, now: float, *, clean: bool = True, ours_is_stale: bool = False
    ) -> int | None: ...

    def try_acquire(self, now: float, *, ours_is_stale: bool = False) -> bool: ...

    def release(self) -> None: ...


class WarmUpSearch(Protocol):
    """What serves Recall's fast phase while the local index warms up (a database's own
    search); thread-safe, never raises (its caller bounds the wait)."""

    @property
    def cold(self) -> bool:
        """This machine holds nothing of the memory yet (its warm-up is the long one)."""
        ...

    def prepare(self) -> bool:
        """Get ready to answer at once (open a connection); whether it is. Best effort."""
        ...

    def search(self, query: str, limit: int) -> list[tuple[MemoryDoc, str]]:
        """The best memories for ``query``, each with its text (empty: none, or no answer)."""
        ...


class MemoryBackend(Protocol):
    name: str
    roots: MemoryRoots  # the folders memory is read from (and written to, in write sections)

    def ensure_pulled(self) -> None:
        """Before the first read: the folders as the store of truth holds them."""
        ...

    def dream_lock(self) -> DreamLock: ...

    def vector_sync(self) -> VectorSync | None:
        """Where semantic candidates' vectors are shared between processes (the database), or
        None (each machine keeps its own, beside its index)."""
        ...

    def warm_up_search(self) -> WarmUpSearch | None:
        """What serves Recall while the local index warms up, or None (Recall waits for it)."""
        ...

    def interrupt(self) -> None:
        """At shutdown, before :meth:`close`: what waits on another writer only to catch up
        (:meth:`ensure_pulled` waiting for a lock) gives up now."""
        ...

    def close(self) -> None: ...


class FileBackend:
    """Memory in Markdown files on this machine (see the module docstring)."""

    name = "files"

    def __init__(self, roots: MemoryRoots) -> None:
        self.roots = roots

    def ensure_pulled(self) -> None:
        return None  # the files are the memory

    def dream_lock(self) -> DreamLock:
        from cairn.memory.store.locks import CONSOLIDATION_LOCK_NAME, ConsolidationLock

        return ConsolidationLock(self.roots.state_dir / CONSOLIDATION_LOCK_NAME)

    def vector_sync(self) -> VectorSync | None:
        return None

    def warm_up_search(self) -> WarmUpSearch | None:
        return None  # the files are the index's source: nothing answers sooner

    def interrupt(self) -> None:
        return None  # nothing to catch up with

    def close(self) -> None:
        return None


def tenant_environ(environ: Mapping[str, str], tenant: str) -> dict[str, str]:
    """``environ`` with the memory base of a daemon tenant (``<base>/tenants/<tenant>``): its
    project memory, user memory, state and mirrors, apart from every other tenant's (never the
    workspace's ``.cairn/memory``, which every tenant shares: ``CAIRN_MEMORY_LOCAL`` is dropped)."""
    from cairn.memory.paths import BASE_DIR_ENV, LOCAL_ENV, memory_base

    problem = tenant_problem(tenant)
    if problem is not None:
        raise MemoryBackendError(problem)
    own = {k: v for k, v in environ.items() if k != LOCAL_ENV}
    return {**own, BASE_DIR_ENV: str(memory_base(environ) / TENANTS_FOLDER / tenant)}


def open_backend(
    settings: Settings,
    project_root: Path,
    *,
    environ: Mapping[str, str] = os.environ,
    tenant: str | None = None,
) -> MemoryBackend:
    """The backend ``memory.backend`` names for the project at ``project_root``; a daemon
    ``tenant`` gets its own folders, and its own namespaces (``tenants/<tenant>/<namespace>``).

    Raises :class:`MemoryBackendError` when the PostgreSQL backend is chosen but cannot be set
    up (no driver, no database configured).
    """
    if tenant is not None:
        environ = tenant_environ(environ, tenant)
    roots = memory_roots(project_root, environ=environ)
    if settings.memory.backend != "postgres":
        return FileBackend(roots)
    from cairn.memory.store.locks import serve_from_database
    from cairn.memory.store.postgres.backend import PostgresBackend, backend_config

    default = functools.partial(namespace_key, project_root, environ)
    config = backend_config(settings, environ, default_namespace=default)
    if tenant is not None:
        config = config.for_tenant(tenant)
    backend = PostgresBackend(config, base=roots.base, user_root=roots.user)
    serve_from_database([shard.root for shard in backend.shards], backend)
    return backend
