"""Rewind from outside: ACP ``_cairn/rewind`` and the daemon's ``/session/{id}/rewind``: the
request a client sends, and the JSON answer (camelCase, as ACP and the daemon send)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cairn.recording.rewind import RewindMode, rewind_modes

if TYPE_CHECKING:
    from cairn.session.rewind import RewindListing, RewindOutcome
    from cairn.session.session import Session

__all__ = [
    "RewindRequest",
    "answer_rewind_request",
    "listing_payload",
    "outcome_payload",
    "parse_rewind_request",
]


@dataclass(frozen=True)
class RewindRequest:
    """What a client asked: the turn list, a rewind to a turn, or undoing the last rewind."""

    action: Literal["list", "rewind", "undo"]
    turn: int | None = None
    mode: RewindMode = "both"


def parse_rewind_request(params: Mapping[str, Any]) -> RewindRequest:
    """``{"turn": N, "mode": "both|code|conversation"}``, ``{"undo": true}``, or the turn list
    (``{"list": true}`` or nothing); :class:`ValueError` says what is wrong with anything else."""
    listing, undo = params.get("list", False), params.get("undo", False)
    turn, mode = params.get("turn"), params.get("mode", "both")
    if not isinstance(listing, bool) or not isinstance(undo, bool):
        raise ValueError("`list` and `undo` must be true or false")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
        raise ValueError("`turn` must be a turn number (1 or more)")
    if mode not in rewind_modes():
        raise ValueError("`mode` must be one of both, code, conversation")
    if sum((listing, undo, turn is not None)) > 1:
        raise ValueError("give one of `turn` (with an optional `mode`), `undo` or `list`")
    if "mode" in params and turn is None:
        raise ValueError("`mode` goes with a `turn`")
    if listing or (not undo and turn is None):
        return RewindRequest("list")
    if undo:
        return RewindRequest("undo")
    return RewindRequest("rewind", turn, mode)


async def answer_rewind_request(session: Session, request: RewindRequest) -> dict[str, Any]:
    """Run ``request`` on ``session``; the JSON answer (camelCase, as ACP and the daemon send).

    :class:`RewindError` when it cannot be done (busy, no such turn, no checkpoints...).
    """
    if request.action == "list":
        return listing_payload(session.id, await session.rewind_listing())
    if request.action == "undo":
        return outcome_payload(session.id, await session.undo_rewind())
    assert request.turn is not None
    return outcome_payload(session.id, await session.rewind(request.turn, request.mode))


def listing_payload(session_id: str, listing: RewindListing) -> dict[str, Any]:
    return {
        "sessionId": session_id,
        "turns": [
            {
                "turn": point.number,
                "prompt": point.text,
                "timestamp": point.timestamp,
                "codeRestorable": point.code,
                "files": [{"path": f.path, "status": f.status} for f in point.files],
            }
            for point in listing.points
        ],
        "undoable": listing.undoable is not None,
        "checkpointsOff": listing.checkpoints_off,
    }


def outcome_payload(session_id: str, outcome: RewindOutcome) -> dict[str, Any]:
    report = outcome.restore
    code = None
    if report is not None:
        code = {
            "restored": report.restored,
            "removed": report.removed,
            "kept": [{"path": k.path, "reason": k.reason} for k in report.kept],
        }
    return {
        "sessionId": session_id,
        "turn": outcome.turn,
        "mode": outcome.mode,
        "message": outcome.message,
        "prompt": outcome.prompt,
        "code": code,
        "conversationRewound": outcome.loaded is not None,
    }
