"""The user turns of a recorded conversation, their checkpoints, and the rewinds done to it.

Two system records tie checkpoints and rewinds into the chat recording (a JSONL chain):

- ``checkpoint``: ``{"commit", "turn": <uuid of the user record>, "files", "bytes", "skipped":
  [first paths], "skippedCount"}``, written when a turn first changes the workspace; when no
  snapshot could be taken then, ``{"commit": null, "turn", "notTaken": <why>}``;
- ``rewind``: ``{"target": <user record uuid>|null, "turn": <its number>, "mode": "both" |
  "conversation" | "code", "restored": <commit put back>|null, "undo": <commit of the state just
  before>|null, "previousTip": <the chain's tip before>, "undoes": <uuid of the rewind it
  undoes>|null}``. A rewind of the conversation is written with the target turn's *parent* as its
  ``parentUuid``, so the target turn and everything after it become a dead branch: resuming
  continues from before that turn. Undoing that rewind writes another ``rewind`` record whose
  parent is the old tip, which makes the old branch the active chain again. A restore writes one
  more, ``"partial": true`` (mode ``code``, ``restored`` null, its ``undo``), before it changes
  the first file: a restore that finishes leaves it on a dead branch, one cut short (or a crash)
  leaves it the newest rewind, so undoing it puts the files back as they were before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from cairn.recording.records import SYSTEM, is_typed_by_user, payload_of, user_display_text

__all__ = [
    "CHECKPOINT",
    "REWIND",
    "RewindMode",
    "RewindRecord",
    "StateMarker",
    "UserTurn",
    "last_undoable_rewind",
    "rewind_modes",
    "state_markers",
    "user_turns",
]

CHECKPOINT: Final = "checkpoint"
REWIND: Final = "rewind"
RECORDED_SKIPPED_PATHS = 20  # skipped paths kept in a checkpoint record (all are in its meta file)

RewindMode = Literal["both", "conversation", "code"]


def rewind_modes() -> tuple[RewindMode, ...]:
    return ("both", "conversation", "code")


@dataclass(frozen=True)
class UserTurn:
    """A prompt the person typed, with the checkpoint taken before the turn changed files."""

    number: int  # 1 for the first turn on the active chain
    uuid: str
    parent_uuid: str | None
    text: str
    timestamp: str | None
    checkpoint: str | None = None  # commit of the workspace before this turn's first change
    skipped: tuple[str, ...] = ()  # paths that checkpoint did not capture (first few)
    not_taken: str | None = None  # why no checkpoint was taken before its first change


@dataclass(frozen=True)
class RewindRecord:
    uuid: str
    mode: RewindMode
    target: str | None
    restored: str | None
    undo: str | None
    previous_tip: str | None
    turn: int | None
    undoes: str | None = None
    partial: bool = False  # written before a restore's first file: the restore stopped part way

    @property
    def rewinds_conversation(self) -> bool:
        return self.mode in ("both", "conversation")


@dataclass(frozen=True)
class StateMarker:
    """A point on the chain where the workspace's state is known by a commit."""

    index: int  # position on the chain
    commit: str
    after_turn: int  # the number of the last user turn before this point (0: none)


@dataclass
class _Scan:
    turns: list[UserTurn] = field(default_factory=list)
    markers: list[StateMarker] = field(default_factory=list)


def user_turns(chain: Sequence[Mapping[str, Any]]) -> list[UserTurn]:
    """The typed user turns of an active chain, oldest first, each with its checkpoint."""
    return _scan(chain).turns


def state_markers(chain: Sequence[Mapping[str, Any]]) -> list[StateMarker]:
    """Where the workspace state is known on the chain, oldest first.

    A checkpoint is the state before its turn changed anything; a rewind's ``undo`` commit is the
    state just before that rewind; its ``restored`` commit is the state right after it.
    """
    return _scan(chain).markers


def _scan(chain: Sequence[Mapping[str, Any]]) -> _Scan:
    scan = _Scan()
    by_uuid: dict[str, int] = {}
    for index, record in enumerate(chain):
        if is_typed_by_user(record):
            turn = UserTurn(
                number=len(scan.turns) + 1,
                uuid=str(record["uuid"]),
                parent_uuid=record.get("parentUuid"),
                text=user_display_text(record),
                timestamp=record.get("timestamp"),
            )
            by_uuid[turn.uuid] = len(scan.turns)
            scan.turns.append(turn)
            continue
        if record.get("type") != SYSTEM:
            continue
        payload = payload_of(record)
        after = len(scan.turns)
        if record.get("subtype") == CHECKPOINT:
            commit = _commit(payload.get("commit"))
            if commit is None:
                _note_not_taken(scan.turns, by_uuid.get(str(payload.get("turn"))), payload)
                continue
            scan.markers.append(StateMarker(index, commit, after))
            position = by_uuid.get(str(payload.get("turn")), after - 1)
            if 0 <= position < len(scan.turns) and scan.turns[position].checkpoint is None:
                skipped = payload.get("skipped")
                paths = (
                    tuple(p for p in skipped if isinstance(p, str))
                    if isinstance(skipped, list)
                    else ()
                )
                scan.turns[position] = _with_checkpoint(scan.turns[position], commit, paths)
        elif record.get("subtype") == REWIND:
            rewind = _rewind_record(record)
            if rewind is None:
                continue
            if rewind.undo is not None:
                scan.markers.append(StateMarker(index, rewind.undo, after))
            if rewind.restored is not None:
                scan.markers.append(StateMarker(index, rewind.restored, after))
    return scan


def _with_checkpoint(turn: UserTurn, commit: str, skipped: tuple[str, ...]) -> UserTurn:
    return UserTurn(
        turn.number, turn.uuid, turn.parent_uuid, turn.text, turn.timestamp, commit, skipped
    )


def _note_not_taken(turns: list[UserTurn], position: int | None, payload: Any) -> None:
    reason = payload.get("notTaken")
    if position is None or not isinstance(reason, str) or turns[position].checkpoint is not None:
        return
    turns[position] = dataclasses.replace(turns[position], not_taken=reason[:500])


def last_undoable_rewind(chain: Sequence[Mapping[str, Any]]) -> RewindRecord | None:
    """The newest rewind on the chain, if no turn was typed after it (else it is history)."""
    for record in reversed(chain):
        if is_typed_by_user(record):
            return None
        if record.get("type") == SYSTEM and record.get("subtype") == REWIND:
            return _rewind_record(record)
    return None


def _rewind_record(record: Mapping[str, Any]) -> RewindRecord | None:
    payload = payload_of(record)
    mode = payload.get("mode")
    if mode not in rewind_modes():
        return None
    turn = payload.get("turn")
    return RewindRecord(
        uuid=str(record["uuid"]),
        mode=mode,
        target=_text(payload.get("target")),
        restored=_commit(payload.get("restored")),
        undo=_commit(payload.get("undo")),
        previous_tip=_text(payload.get("previousTip")),
        turn=turn if isinstance(turn, int) else None,
        undoes=_text(payload.get("undoes")),
        partial=payload.get("partial") is True,
    )


def _commit(value: Any) -> str | None:
    if (
        isinstance(value, str)
        and len(value) in (40, 64)
        and all(c in "0123456789abcdef" for c in value)
    ):
        return value
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
