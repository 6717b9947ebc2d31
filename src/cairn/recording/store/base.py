"""The session store's interface (see :mod:`cairn.recording.store`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cairn.recording.listing import SessionInfo
    from cairn.recording.reader import LoadedSession
    from cairn.recording.recorder import ChatRecorder

__all__ = ["SessionStore", "SessionStores"]


class SessionStore(Protocol):
    """The recorded sessions of one project (and daemon tenant).

    Blocking: a caller on an event loop runs these in a worker thread.
    """

    name: str  # "files" or "postgres"

    def recorder(
        self, session_id: str, *, cwd: Path, version: str, parent_uuid: str | None
    ) -> ChatRecorder:
        """Where a session's new records go; ``parent_uuid``: the chain's tip to continue."""
        ...

    def load(self, session_id: str) -> LoadedSession:
        """The session's conversation; :class:`~cairn.recording.reader.SessionLoadError` when
        it is not recorded here or cannot be read."""
        ...

    def exists(self, session_id: str) -> bool:
        """A recording of ``session_id`` exists (never true for a string that is no id)."""
        ...

    def list(self, *, limit: int = 50, cwd: Path | None = None) -> list[SessionInfo]:
        """The sessions, newest first; with ``cwd``, only those that ran in that folder."""
        ...


# How a runtime gets its store: (project root, daemon tenant or None) -> the store.
SessionStores = Callable[[Path, "str | None"], SessionStore]
