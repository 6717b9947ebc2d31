"""The JSONL chat recording: writing it, listing sessions, and loading one to resume or replay.

``$CAIRN_HOME/projects/<project-key>/chats/<session-id>.jsonl``, one record per line chained by
``uuid``/``parentUuid`` (the reference system's format, so recordings stay readable by both).
"""

from cairn.recording.listing import SessionInfo, latest_session, list_sessions
from cairn.recording.reader import LoadedSession, SessionLoadError, load_session, pending_question
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
