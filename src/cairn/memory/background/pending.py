"""``extract-pending.json``: sessions whose extraction was cut short or failed, for the next one.

An extraction cancelled by a shutdown (``cairn -p`` skipping its wait, Ctrl+C, a timeout), or
one that failed (its agent stopped by loop protection, a request that failed), leaves its
session here; the next extraction scheduled in the project runs the pending one
first, from the session's recording, so what the user said is not lost. The file is
``{"sessions": ["<id>", ...], "updatedAt": ...}`` in the project state folder, newest last.

A pending session can be **claimed** (:func:`claim_session`): ``cairn -p`` hands its turn's
extraction to a worker process (``cairn.session.extract_worker``) and claims the session for it;
the worker inherits the claim, an OS file lock on ``extract-claims/<id>.lock``. While it is held,
:func:`take_pending` leaves the session to its holder; the kernel releases it when the holder
exits, even by ``kill -9``, so a worker that dies leaves the session to the next extraction.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path

from cairn.fsutil import atomic_write_json
from cairn.memory.background.state_files import iso_time, read_state_object

__all__ = [
    "CLAIMS_FOLDER",
    "MAX_PENDING_SESSIONS",
    "PENDING_FILE_NAME",
    "Claim",
    "add_pending",
    "claim_session",
    "drop_pending",
    "is_claimed",
    "read_pending",
    "take_pending",
]

PENDING_FILE_NAME = "extract-pending.json"
CLAIMS_FOLDER = "extract-claims"  # <id>.lock: a session whose extraction a process holds
MAX_PENDING_SESSIONS = 5  # the newest kept: an older cut-short extraction is given up
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # names a recording in the chats folder


def read_pending(state_dir: Path, *, now: float) -> list[str]:
    sessions = read_state_object(state_dir / PENDING_FILE_NAME, now=now).get("sessions")
    if not isinstance(sessions, list):
        return []
    return [s for s in sessions if isinstance(s, str) and _SESSION_ID.fullmatch(s)]


def add_pending(state_dir: Path, session_id: str, *, now: float) -> None:
    """Note that ``session_id``'s extraction did not finish."""
    sessions = [s for s in read_pending(state_dir, now=now) if s != session_id]
    _write(state_dir, [*sessions, session_id][-MAX_PENDING_SESSIONS:], now=now)


def take_pending(state_dir: Path, *, besides: str, now: float) -> str | None:
    """The newest pending session other than ``besides`` and unclaimed, removed from the file
    (its retry runs now; cut short again, it is added back). A claimed one stays: its holder
    extracts it."""
    sessions = read_pending(state_dir, now=now)
    claimed = {s for s in sessions if is_claimed(state_dir, s)}
    free = [s for s in sessions if s != besides and s not in claimed]
    taken = free[-1] if free else None
    # ``besides`` is extracting its own history now: pending no more, unless it is claimed (a
    # worker's own session stays pending until the worker has extracted it)
    kept = [s for s in sessions if s != taken and (s != besides or s in claimed)]
    if kept != sessions:
        _write(state_dir, kept, now=now)
    return taken


def drop_pending(state_dir: Path, session_id: str, *, now: float) -> None:
    """``session_id`` was extracted: it is pending no more."""
    sessions = read_pending(state_dir, now=now)
    if session_id in sessions:
        _write(state_dir, [s for s in sessions if s != session_id], now=now)


class Claim:
    """A session's extraction held by this process: a lock on an open file, which a child
    started with the descriptor (``pass_fds``) holds too, and keeps after this process exits."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd

    def release(self) -> None:
        """Let another process extract the session (its lock file removed, then unlocked)."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def claim_session(state_dir: Path, session_id: str) -> Claim | None:
    """Claim ``session_id``'s extraction; ``None`` when another process holds it."""
    if not _SESSION_ID.fullmatch(session_id):
        raise ValueError(f"not a session id: {session_id!r}")
    folder = state_dir / CLAIMS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.lock"
    for _ in range(3):  # a holder may remove the file between our open and our lock
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return Claim(path, fd)
        os.close(fd)
    return None


def is_claimed(state_dir: Path, session_id: str) -> bool:
    """Whether a live process holds ``session_id``'s claim."""
    path = state_dir / CLAIMS_FOLDER / f"{session_id}.lock"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False  # no claim file, or none we may read: not held
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # a shared lock we took ends with the descriptor
    return False


def _write(state_dir: Path, sessions: list[str], *, now: float) -> None:
    path = state_dir / PENDING_FILE_NAME
    if not sessions and not path.exists():
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"sessions": sessions, "updatedAt": iso_time(now)})
