"""Writing a session's chat recording: one JSON record per line, chained by uuid/parentUuid.

:class:`ChatRecorder` makes the records; a :class:`RecordSink` keeps them. The file sink (the
default) writes each record as one ``os.write`` on an ``O_APPEND`` descriptor, so a line never
interleaves with another writer's and a crash can tear only the last line (which the reader
skips); the PostgreSQL session store's sink (:mod:`cairn.recording.store.postgres`) appends the
same records to a table. Recording is a helper, not the turn: a failed write goes to the debug
log and never raises into the caller.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

from cairn.content import Content
from cairn.debug_log import get_logger
from cairn.ids import new_uuid
from cairn.recording.records import (
    ASSISTANT,
    CHAT_COMPRESSION,
    SLASH_COMMAND,
    SYSTEM,
    TOOL_RESULT,
    USER,
    format_timestamp,
)
from cairn.vocabulary.usage import Usage

__all__ = ["ChatRecorder", "FileSink", "RecordSink"]

FILE_MODE = 0o600  # recordings hold whatever was pasted into the chat: owner only

_log = get_logger("CHAT_RECORDING")


class RecordSink(Protocol):
    """Where a recorder's records go: a JSONL file, or a session store's table."""

    @property
    def path(self) -> Path | None:
        """The recording's file (hooks get it as ``transcript_path``), or None."""
        ...

    def write(self, record: Mapping[str, Any], line: bytes) -> bool:
        """Keep ``record`` (``line``: the record as its JSONL line); False when it was lost."""
        ...

    def close(self) -> None: ...


class FileSink:
    """Records appended to a JSONL file (created, with its folders, if missing)."""

    def __init__(self, path: Path) -> None:
        self.path: Path | None = path
        self._file = path
        self._lock = threading.Lock()
        self._fd: int | None = self._open(path)

    def write(self, record: Mapping[str, Any], line: bytes) -> bool:
        with self._lock:
            fd = self._fd
            if fd is None:
                _log.warning(f"chat recording {self._file} is closed; record dropped")
                return False
            try:
                written = os.write(fd, line)
                while written < len(line):  # only on a nearly full disk; finish the line anyway
                    written += os.write(fd, line[written:])
            except OSError as exc:
                _log.error(f"chat recording write to {self._file} failed: {exc}; record dropped")
                return False
            return True

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.fsync(fd)
        with contextlib.suppress(OSError):
            os.close(fd)

    def _open(self, path: Path) -> int | None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            _log.error(f"cannot open chat recording {path}: {exc}; this session is not recorded")
            return None
        _end_unfinished_line(fd, path)
        return fd


class ChatRecorder(contextlib.AbstractContextManager["ChatRecorder"]):
    """Appends records to ``target``: a JSONL file's path (created, with its folders, if
    missing) or another :class:`RecordSink`.

    To resume a session, open its recording again with ``parent_uuid`` set to the loaded
    session's ``last_uuid``: new records then continue the active chain.
    """

    def __init__(
        self,
        target: Path | RecordSink,
        *,
        session_id: str,
        cwd: Path,
        version: str,
        parent_uuid: str | None = None,
        clock: Callable[[], _dt.datetime] | None = None,
    ) -> None:
        self.sink: RecordSink = FileSink(target) if isinstance(target, Path) else target
        self.session_id = session_id
        self.cwd = cwd
        self.version = version
        self.last_uuid = parent_uuid
        self._clock = clock or (lambda: _dt.datetime.now(_dt.UTC))
        self._lock = threading.Lock()

    @property
    def path(self) -> Path | None:
        """The recording's file, or None when its records go elsewhere (a database)."""
        return self.sink.path

    def record_user(
        self,
        content: Content,
        *,
        display_text: str | None = None,
        hook_context: str | None = None,
        provenance: str | None = None,
    ) -> str:
        """A user message as sent to the model.

        ``display_text`` is what the person typed when ``content`` carries more (reminders,
        hook context); ``provenance`` other than ``real_user`` (e.g. ``"stop_hook"``) marks a
        message the runtime sent in the user's role, which replay does not show as typed text.
        """
        payload: dict[str, Any] = {}
        if display_text is not None:
            payload["displayText"] = display_text
        if hook_context is not None:
            payload["hookContext"] = hook_context
        return self._append(
            USER,
            message=content.to_dict(),
            systemPayload=payload or None,
            provenance=provenance,
        )

    def record_assistant(
        self, content: Content, *, model: str, usage: Mapping[str, Any] | None = None
    ) -> str:
        return self._append(
            ASSISTANT,
            message=content.to_dict(),
            model=model,
            usageMetadata=dict(usage) if usage is not None else None,
        )

    def record_answer(self, content: Content, model: str, usage: Usage) -> None:
        """A model answer as the agent client reports it (:meth:`record_assistant`)."""
        self.record_assistant(content, model=model, usage=usage.to_dict())

    def record_tool_result(
        self, content: Content, *, tool_results: list[dict[str, Any]] | None = None
    ) -> str:
        """Function responses (role ``user``) sent back to the model, with optional UI details."""
        return self._append(TOOL_RESULT, message=content.to_dict(), toolCallResult=tool_results)

    def record_slash_command(
        self,
        *,
        phase: Literal["invocation", "result"],
        raw_command: str,
        output_items: list[dict[str, Any]] | None = None,
    ) -> str:
        """A slash command and, as a ``result``, what it showed (e.g. an ``away_recap`` item)."""
        payload: dict[str, Any] = {"phase": phase, "rawCommand": raw_command}
        if output_items is not None:
            payload["outputHistoryItems"] = output_items
        return self._append(SYSTEM, subtype=SLASH_COMMAND, systemPayload=payload)

    def record_compression(
        self, original_tokens: int, new_tokens: int, status: str, history: Sequence[Content]
    ) -> str:
        """A compression, with the history it left (a resume starts from it)."""
        info = {
            "originalTokenCount": original_tokens,
            "newTokenCount": new_tokens,
            "compressionStatus": status,
        }
        payload = {"info": info, "compressedHistory": [entry.to_dict() for entry in history]}
        return self.record_system(CHAT_COMPRESSION, payload)

    def record_recap(self, text: str) -> str:
        """A recap shown in the conversation, as the result of ``/recap`` (only the result
        phase: a resume must not replay a ``/recap`` the user never typed)."""
        item = {"type": "away_recap", "text": text}
        return self.record_slash_command(phase="result", raw_command="/recap", output_items=[item])

    def record_system(
        self, subtype: str, payload: Mapping[str, Any], *, content: Content | None = None
    ) -> str:
        """A system record: ``chat_compression`` (``{"info", "compressedHistory"}``),
        ``mid_turn_user_message`` (``content``: the user parts as sent, or ``{"text": ...}``),
        ``ask_user_pending``, ...
        """
        return self._append(
            SYSTEM,
            subtype=subtype,
            message=content.to_dict() if content is not None else None,
            systemPayload=dict(payload),
        )

    def branch_from(self, parent_uuid: str | None) -> None:
        """Make the next record a child of ``parent_uuid`` (``None``: a new root), leaving the
        records after that point on a dead branch (a conversation rewind)."""
        with self._lock:
            self.last_uuid = parent_uuid

    def close(self) -> None:
        self.sink.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _append(self, record_type: str, **fields: Any) -> str:
        record_uuid = new_uuid()
        with self._lock:
            record = {
                "uuid": record_uuid,
                "parentUuid": self.last_uuid,
                "sessionId": self.session_id,
                "timestamp": format_timestamp(self._clock()),
                "type": record_type,
                "subtype": fields.pop("subtype", None),
                "cwd": str(self.cwd),
                "version": self.version,
                **fields,
            }
            kept = {k: v for k, v in record.items() if v is not None or k == "parentUuid"}
            try:
                line = _encode(kept)
            except (TypeError, ValueError) as exc:
                _log.error(f"chat record of type {record_type} cannot be written as JSON: {exc}")
                return record_uuid
            # The chain only advances over records that were kept: a lost record must not
            # become the parent of the next one, or a resume would drop everything before it.
            if self.sink.write(kept, line):
                self.last_uuid = record_uuid
        return record_uuid


def _encode(record: Mapping[str, Any]) -> bytes:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return (text + "\n").encode("utf-8")


def _end_unfinished_line(fd: int, path: Path) -> None:
    """After a crash mid-write the file may end inside a record; start ours on a new line."""
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return
        with open(path, "rb") as handle:
            handle.seek(size - 1)
            last = handle.read(1)
        if last != b"\n":
            os.write(fd, b"\n")
    except OSError as exc:
        _log.warning(f"cannot check the end of chat recording {path}: {exc}")
