"""Where sessions live: their recordings, listing and loading, behind one interface.

- :class:`~cairn.recording.store.files.FileSessionStore` (the default, one machine): a JSONL
  file per session under the project's ``chats/`` folder, exactly as cairn always recorded.
- :class:`~cairn.recording.store.postgres.PostgresSessionStore` (``cairn serve --database``):
  the same records in PostgreSQL, with each session's metadata, its lease (which replica runs
  it), its event log and its prompts, so any replica serves any session.

The session runtime asks its store (:attr:`cairn.session.runtime.Runtime.sessions`) and never
knows which one it has. The names load on first use: the files backend never imports psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.recording.store.base import SessionStore, SessionStores
    from cairn.recording.store.files import FileSessionStore, file_stores

__all__ = ["FileSessionStore", "SessionStore", "SessionStores", "file_stores"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SessionStore": "base",
        "SessionStores": "base",
        "FileSessionStore": "files",
        "file_stores": "files",
    },
    __all__,
)
