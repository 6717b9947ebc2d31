"""The debug log: ``$CAIRN_HOME/debug/<session-id>.txt``, one line per message.

Each line is ``<ISO time> [LEVEL] [TAG] message``. ``debug/latest`` is a symlink to the log of the
most recent session. ``CAIRN_DEBUG_LOG_FILE=0`` (or ``false``, ``off``, ``no``) turns file logging
off. Several sessions in one process (the daemon) each log to their own file: the session is taken
from a context variable set around each session's work.

Lines logged before the process has a session (while it starts, or loads the session to resume)
are kept, up to :data:`MAX_PENDING_LINES`, and written to the log of the first process session.
:func:`mirror_warnings` also hands every warning and error to a stream: ``cairn --acp`` and
``cairn serve`` show them on stderr, their operator's log.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import os
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TextIO

from cairn.config.paths import debug_dir, log_folder_moves_to

__all__ = [
    "MAX_PENDING_LINES",
    "DebugLogger",
    "bind_session",
    "get_logger",
    "log_path",
    "mirror_warnings",
    "set_process_session",
]

_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("cairn_session", default=None)
_process_session: str | None = None
_lock = threading.Lock()
_handles: dict[str, IO[str]] = {}
_MAX_OPEN = 128  # open log handles kept; older ones are closed and reopened on demand
MAX_PENDING_LINES = 500  # lines kept from before the process has a session (the oldest go first)
_pending: deque[str] = deque(maxlen=MAX_PENDING_LINES)
_mirror: tuple[TextIO, str] | None = None  # (stream, line prefix) that warnings also go to


def _enabled() -> bool:
    value = os.environ.get("CAIRN_DEBUG_LOG_FILE", "").strip().lower()
    return value not in {"0", "false", "off", "no"}


def log_path(session_id: str) -> Path:
    return debug_dir() / f"{session_id}.txt"


def set_process_session(session_id: str | None) -> None:
    """The session logged to when no other session is bound (one-session processes).

    The lines logged before there was one go to its log first; ``None`` drops them.
    """
    global _process_session
    _process_session = session_id
    if not session_id:
        _pending.clear()
        return
    if _enabled():
        _point_latest(session_id)
    with _lock:
        early = list(_pending)
        _pending.clear()
    for line in early:
        _write(line)


def mirror_warnings(stream: TextIO | None, prefix: str = "") -> None:
    """Also write each warning and error to ``stream`` (``None``: stop), one line each:
    ``<prefix><level>: [<TAG>] <first line of the message>``."""
    global _mirror
    _mirror = None if stream is None else (stream, prefix)


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
    if not _enabled():
        return
    if session is None:
        with _lock:
            _pending.append(line)
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

    def warning(self, message: str, *, mirror: bool = True) -> None:
        """``mirror=False``: not to :func:`mirror_warnings`' stream (it has the record already)."""
        self._log("WARN", message)
        if mirror:
            self._mirror("warning", message)

    def error(self, message: str, *, mirror: bool = True) -> None:
        self._log("ERROR", message)
        if mirror:
            self._mirror("error", message)

    def _mirror(self, level: str, message: str) -> None:
        target = _mirror
        if target is None:
            return
        stream, prefix = target
        first = message.strip().splitlines()[0] if message.strip() else ""
        try:
            with _lock:
                stream.write(f"{prefix}{level}: [{self.tag}] {first}\n")
                stream.flush()
        except (OSError, ValueError):  # a closed stderr must not break the caller
            pass


def get_logger(tag: str) -> DebugLogger:
    return DebugLogger(tag)


log_folder_moves_to(get_logger("CONFIG"))
