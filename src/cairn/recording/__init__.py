"""The JSONL chat recording: writing it, listing sessions, and loading one to resume or replay.

``$CAIRN_HOME/projects/<project-key>/chats/<session-id>.jsonl``, one record per line chained by
``uuid``/``parentUuid`` (the reference system's format, so recordings stay readable by both).

The public names are loaded on first use: writing a recording does not load the reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.recording.listing import SessionInfo, latest_session, list_sessions
    from cairn.recording.reader import (
        LoadedSession,
        SessionLoadError,
        load_session,
        pending_question,
    )
    from cairn.recording.recorder import ChatRecorder
    from cairn.recording.replay import ReplayItem, ReplayKind


__all__ = [
    "ChatRecorder",
    "LoadedSession",
    "ReplayItem",
    "ReplayKind",
    "SessionInfo",
    "SessionLoadError",
    "latest_session",
    "list_sessions",
    "load_session",
    "pending_question",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SessionInfo": "listing",
        "latest_session": "listing",
        "list_sessions": "listing",
        "LoadedSession": "reader",
        "SessionLoadError": "reader",
        "load_session": "reader",
        "pending_question": "reader",
        "ChatRecorder": "recorder",
        "ReplayItem": "replay",
        "ReplayKind": "replay",
    },
    __all__,
)
