"""The debug log: ``$CAIRN_HOME/debug/<session-id>.txt``, one line per message.

Each line is ``<ISO time> [LEVEL] [TAG] message``. ``debug/latest`` is a symlink to the log of the
most recent session. ``CAIRN_DEBUG_LOG_FILE=0`` (or ``false``, ``off``, ``no``) turns file logging
off. Several sessions in one process (the daemon) each log to their own file: the session is taken
from a context variable set around each session's work.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from cairn.config.paths import debug_dir

__all__ = ["DebugLogger", "bind_session", "get_logger", "log_path", "set_process_session"]

_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("cairn_session", default=None)
_process_session: str | None = None
_lock = threading.Lock()
_handles: dict[str, IO[str]] = {}
_MAX_OPEN = 128  # open log handles kept; older ones are closed and reopened on demand


def _enabled() -> bool:
    value = os.environ.get("CAIRN_DEBUG_LOG_FILE", "").strip().lower()
    return value not in {"0", "false", "off", "no"}


def log_path(session_id: str) -> Path:
    return debug_dir() / f"{session_id}.txt"


def set_process_session(session_id: str | None) -> None:
    """The session logged to when no other session is bound (one-session processes)."""
    global _process_session
    _process_session = session_id
    if session_id and _enabled():
        _point_latest(session_id)


@contextlib.contextmanager
def bind_session(session_id: str) -> Iterator[None]:
    """Log to ``session_id`` inside this block (and in tasks created inside it)."""
    token = _session.set(session_id)
    try:
        yield
    finally:
        _session.reset(token)


def _point_latest(session_id: str) -> None:
    folder = debug_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / "latest"
        tmp = folder / f".latest.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(f"{session_id}.txt")
        os.replace(tmp, link)
    except OSError:
        pass  # a missing symlink is cosmetic (e.g. filesystems without symlinks)


def _write(line: str) -> None:
    session = _session.get() or _process_session
    if session is None or not _enabled():
        return
    with _lock:
        handle = _handles.get(session)
        try:
            if handle is None:
                if len(_handles) >= _MAX_OPEN:
                    _handles.pop(next(iter(_handles))).close()
                path = log_path(session)
                path.parent.mkdir(parents=True, exist_ok=True)
                handle = path.open("a", encoding="utf-8", buffering=1)
                _handles[session] = handle
            handle.write(line)
        except OSError:
            _handles.pop(session, None)


class DebugLogger:
    def __init__(self, tag: str):
        self.tag = tag

    def _log(self, level: str, message: str) -> None:
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
        text = message.replace("\r", "\\r").replace("\n", "\\n")  # one entry, one line
        _write(f"{now} [{level}] [{self.tag}] {text}\n")

    def debug(self, message: str) -> None:
        self._log("DEBUG", message)

    def info(self, message: str) -> None:
        self._log("INFO", message)

    def warning(self, message: str) -> None:
        self._log("WARN", message)

    def error(self, message: str) -> None:
        self._log("ERROR", message)


def get_logger(tag: str) -> DebugLogger:
    return DebugLogger(tag)
