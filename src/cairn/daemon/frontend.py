"""The daemon's :class:`~cairn.vocabulary.interaction.Frontend`: approvals and answers by HTTP vote.

A permission request (or an ``ask_user_question``) is published as a ``permission_request``
event; the first valid vote on ``POST /session/{id}/permission/{requestId}`` resolves it. A
cancelled turn, a closed session, shutdown or the timeout resolve it as cancelled. Every
resolution is published as ``permission_resolved``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cairn.daemon.errors import STRICT_REASON, ApiError, token_required
from cairn.session.updates import permission_options, permission_tool_call
from cairn.tools.base import Question
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest
from cairn.vocabulary.permissions import outcome_of_option

__all__ = ["DaemonFrontend", "Vote"]

Publish = Callable[[str, Mapping[str, Any]], object]


@dataclass(frozen=True)
class Vote:
    """A parsed vote: an option, answers to questions, or cancelled."""

    outcome: Literal["selected", "cancelled"]
    option_id: str | None = None
    answers: tuple[str, ...] | None = None


@dataclass
class _Pending:
    kind: Literal["permission", "question"]
    future: asyncio.Future[Vote]
    question_count: int = 0
    payload: dict[str, Any] = field(default_factory=dict)
    cancel_reason: str | None = None


class DaemonFrontend:
    interactive = True

    def __init__(self, session_id: str, publish: Publish, *, timeout: float) -> None:
        self._session_id = session_id
        self._publish = publish
        self._timeout = timeout
        self._pending: dict[str, _Pending] = {}
        self.closing_reason: str | None = None  # why requests end when the session closes

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The open requests, as published (for the status route)."""
        return [p.payload for p in self._pending.values()]

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        body = {
            "toolCall": permission_tool_call(request),
            "options": permission_options(request),
        }
        vote = await self._ask("permission", body)
        if vote.outcome == "cancelled" or vote.option_id is None:
            return "cancelled"
        return outcome_of_option(vote.option_id) or "cancelled"

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        listed = [
            {
                "question": q.question,
                "header": q.header,
                "options": list(q.options),
                "multiSelect": q.multi_select,
            }
            for q in questions
        ]
        vote = await self._ask("question", {"questions": listed, "options": []}, len(questions))
        if vote.outcome == "cancelled" or vote.answers is None:
            return None
        return list(vote.answers)

    def vote(self, request_id: str, body: Any) -> bool:
        """Apply a vote; False when no such request is open (unknown or already resolved)."""
        pending = self._pending.get(request_id)
        if pending is None or pending.future.done():
            return False
        pending.future.set_result(_parse_vote(body, pending))
        return True

    def cancel_all(self, reason: str) -> None:
        for request_id, pending in list(self._pending.items()):
            if not pending.future.done():
                pending.future.set_result(Vote("cancelled"))
                pending.cancel_reason = reason
            self._pending.pop(request_id, None)

    async def _ask(
        self, kind: Literal["permission", "question"], body: dict[str, Any], questions: int = 0
    ) -> Vote:
        request_id = uuid.uuid4().hex
        future: asyncio.Future[Vote] = asyncio.get_running_loop().create_future()
        payload = {"requestId": request_id, "sessionId": self._session_id, "kind": kind, **body}
        pending = _Pending(kind, future, questions, payload)
        self._pending[request_id] = pending
        self._publish("permission_request", payload)
        reason: str | None = None
        try:
            async with asyncio.timeout(self._timeout):
                vote = await future
        except TimeoutError:
            vote, reason = Vote("cancelled"), "timeout"
        except asyncio.CancelledError:
            self._resolved(request_id, Vote("cancelled"), self.closing_reason or "agent_cancelled")
            raise
        reason = reason or pending.cancel_reason
        self._resolved(request_id, vote, reason)
        return vote

    def _resolved(self, request_id: str, vote: Vote, reason: str | None) -> None:
        self._pending.pop(request_id, None)
        outcome: dict[str, Any] = {"outcome": vote.outcome}
        if vote.option_id is not None:
            outcome["optionId"] = vote.option_id
        data: dict[str, Any] = {"requestId": request_id, "sessionId": self._session_id}
        data["outcome"] = outcome
        if vote.answers is not None:
            data["answers"] = list(vote.answers)
        if reason is not None:
            data["reason"] = reason
        self._publish("permission_resolved", data)


def _parse_vote(body: Any, pending: _Pending) -> Vote:
    """``{"outcome": {"outcome": "selected", "optionId": ...}}``, ``{"outcome": {"outcome":
    "cancelled"}}`` or, for questions, ``{"answers": [...]}``; anything else is a 400."""
    if not isinstance(body, Mapping):
        raise ApiError(400, "The vote must be a JSON object.", "invalid_vote")
    outcome = body.get("outcome")
    if isinstance(outcome, Mapping) and outcome.get("outcome") == "cancelled":
        return Vote("cancelled")
    if pending.kind == "question":
        return Vote("selected", answers=_answers(body.get("answers"), pending.question_count))
    if not isinstance(outcome, Mapping) or outcome.get("outcome") != "selected":
        raise ApiError(
            400,
            'outcome must be {"outcome": "selected", "optionId": ...} or {"outcome": "cancelled"}.',
            "invalid_vote",
        )
    option_id = outcome.get("optionId")
    offered = [o["optionId"] for o in pending.payload.get("options", [])]
    if option_id == "allow_always" and option_id not in offered:  # the session's gate is shut
        raise token_required(
            f"Answering allow_always widens what the agent may do without asking: "
            f"{STRICT_REASON}. Vote {' or '.join(offered)}."
        )
    if not isinstance(option_id, str) or option_id not in offered:
        raise ApiError(400, f"optionId must be one of {', '.join(offered)}.", "invalid_vote")
    return Vote("selected", option_id=option_id)


def _answers(value: Any, count: int) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or len(value) != count
        or not all(isinstance(a, str) for a in value)
    ):
        raise ApiError(
            400, f"answers must be a list of {count} string(s), one per question.", "invalid_vote"
        )
    return tuple(value)
