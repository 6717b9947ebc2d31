"""Recorders and hand-written recordings for tests."""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cairn.recording import ChatRecorder

VERSION = "0.1.0-test"
START = _dt.datetime(2025, 3, 1, 9, 30, tzinfo=_dt.UTC)


def new_session_id() -> str:
    return str(uuid.uuid4())


def ticking_clock(start: _dt.datetime = START) -> Iterator[_dt.datetime]:
    moment = start
    while True:
        yield moment
        moment += _dt.timedelta(seconds=1)


def open_recorder(chats: Path, session_id: str | None = None, **kwargs: Any) -> ChatRecorder:
    session_id = session_id or new_session_id()
    clock = ticking_clock(kwargs.pop("start", START))
    return ChatRecorder(
        chats / f"{session_id}.jsonl",
        session_id=session_id,
        cwd=Path("/work/project"),
        version=VERSION,
        clock=lambda: next(clock),
        **kwargs,
    )


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_lines(path: Path, records: list[dict[str, Any]], tail: str = "") -> None:
    """A recording written by hand: ``records`` as JSON lines, then ``tail`` verbatim."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(r) + "\n" for r in records)
    path.write_text(body + tail)


def record(uuid_: str, parent: str | None, type_: str, **fields: Any) -> dict[str, Any]:
    return {
        "uuid": uuid_,
        "parentUuid": parent,
        "sessionId": "s",
        "timestamp": "2025-03-01T09:30:00.000Z",
        "type": type_,
        "cwd": "/p",
        "version": VERSION,
        **fields,
    }


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def model_message(text: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": text}]}
