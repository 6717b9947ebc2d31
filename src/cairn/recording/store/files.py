"""Sessions in JSONL files on this machine: ``<project>/chats/<session-id>.jsonl`` (a daemon
tenant's under ``<project>/tenants/<tenant>/chats``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.config.paths import chats_dir

if TYPE_CHECKING:
    from cairn.recording.listing import SessionInfo
    from cairn.recording.reader import LoadedSession
    from cairn.recording.recorder import ChatRecorder

__all__ = ["FileSessionStore", "file_stores", "tenant_chats_dir"]


def tenant_chats_dir(project_root: Path, tenant: str | None) -> Path:
    """Where the recordings of a project (and daemon tenant) are kept."""
    chats = chats_dir(project_root)
    return chats if tenant is None else chats.parent / "tenants" / tenant / "chats"


class FileSessionStore:
    name = "files"

    def __init__(self, chats: Path) -> None:
        self.chats = chats

    def path(self, session_id: str) -> Path:
        return self.chats / f"{session_id}.jsonl"

    def recorder(
        self, session_id: str, *, cwd: Path, version: str, parent_uuid: str | None
    ) -> ChatRecorder:
        from cairn.recording.recorder import ChatRecorder

        return ChatRecorder(
            self.path(session_id),
            session_id=session_id,
            cwd=cwd,
            version=version,
            parent_uuid=parent_uuid,
        )

    def load(self, session_id: str) -> LoadedSession:
        from cairn.recording.listing import session_path
        from cairn.recording.reader import SessionLoadError, load_session

        path = session_path(self.chats, session_id)
        if path is None:
            raise SessionLoadError(f"no session recording at {self.path(session_id)}")
        return load_session(path)

    def exists(self, session_id: str) -> bool:
        from cairn.recording.listing import session_path

        return session_path(self.chats, session_id) is not None

    def list(self, *, limit: int = 50, cwd: Path | None = None) -> list[SessionInfo]:
        from cairn.recording.listing import list_sessions

        return list_sessions(self.chats, limit=limit, cwd=cwd)


def file_stores(project_root: Path, tenant: str | None) -> FileSessionStore:
    """The default :data:`~cairn.recording.store.base.SessionStores`: files on this machine."""
    return FileSessionStore(tenant_chats_dir(project_root, tenant))
