"""What the session tables hold, as values (a lease, a stored event, a stored prompt), and the
lease errors: shared by the session store (:mod:`.postgres`) and its writer (:mod:`.writer`)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn.database.connection import DatabaseUnavailable

__all__ = [
    "Lease",
    "LeaseLost",
    "OwnedElsewhere",
    "StoredEvent",
    "StoredPrompt",
    "jsonb",
    "stored_prompt",
]


class LeaseLost(DatabaseUnavailable):
    """This replica's lease on a session is gone (expired and taken, or the database lost):
    nothing more of the session may be written from here."""


class OwnedElsewhere(Exception):
    """Another replica holds the session's lease (``live``: not expired yet)."""

    def __init__(self, owner: str, url: str | None, live: bool) -> None:
        super().__init__(f"session leased by replica {owner}")
        self.owner = owner
        self.url = url
        self.live = live


@dataclass(frozen=True)
class Lease:
    """A lease this replica took (:meth:`PostgresSessionStore.acquire`)."""

    session_id: str
    owner: str
    epoch: int
    record_count: int  # records kept: a copy of the session built at this count is current
    event_seq: int  # the last event's id
    state: str  # "open" or "closed"
    interrupted: str | None  # the prompt a dead owner was running (it never finished)
    cwd: str
    model: str | None = None  # the model the session was switched to, if any
    taken_at: float = 0.0  # time.monotonic() before the lease was taken (it is ours from then)


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    type: str
    envelope: str  # the SSE ``data:`` line (the envelope's JSON)

    @property
    def frame(self) -> bytes:
        return f"id: {self.seq}\nevent: {self.type}\ndata: {self.envelope}\n\n".encode()


@dataclass(frozen=True)
class StoredPrompt:
    prompt_id: str
    state: str
    body: Any
    client_id: str | None
    queued_at: _dt.datetime
    last_event_id: int
    body_hash: str
    idempotency_key: str | None = None


def stored_prompt(row: Sequence[Any]) -> StoredPrompt:
    return StoredPrompt(
        prompt_id=row[0],
        state=row[1],
        body=row[2],
        client_id=row[3],
        queued_at=row[4],
        last_event_id=int(row[5]),
        body_hash=row[6],
        idempotency_key=row[7],
    )


def jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value)
