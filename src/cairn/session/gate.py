"""The one check on widening what a session may do without asking.

A front end that cannot tell who is calling it (the daemon without a token) closes the gate of
the sessions it opens. Every path that widens permissions asks the gate, whatever front end or
command it comes from:

- a more permissive approval mode (``plan`` < ``default`` < ``auto-edit`` < ``yolo``), set by a
  route, by ``/approval-mode``, or asked for when the session is created or loaded;
- an "allow always" answer (the session would stop asking for that tool or program);
- an approval of a change to cairn's own configuration (settings, hooks, MCP servers), which
  could add allow rules or hooks;
- an action that rewrites the workspace without a tool call to approve (``/rewind`` and its
  undo, however they are asked for).

Narrowing is always allowed. An open gate (the terminal UI, ``cairn -p``, an editor over ACP:
the person at the keyboard is the authority) allows everything.
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.debug_log import get_logger
from cairn.values import Value, replace
from cairn.vocabulary.interaction import (
    Frontend,
    PermissionOutcome,
    PermissionRequest,
    Question,
)

__all__ = [
    "APPROVAL_MODE_ORDER",
    "OPEN_GATE",
    "GatedFrontend",
    "PermissionGate",
    "WideningRefused",
]

APPROVAL_MODE_ORDER = ("plan", "default", "auto-edit", "yolo")  # least to most permissive
_log = get_logger("SESSION")


class WideningRefused(PermissionError):
    """A change that would widen permissions was refused; the message says what allows it."""


class PermissionGate(Value):
    open: bool = True
    closed_because: str = ""  # what would open it, e.g. "start the daemon with a token"

    def check_mode(self, current: str, wanted: str) -> None:
        """Raise :class:`WideningRefused` if ``wanted`` is more permissive than ``current``."""
        if self.open or _rank(wanted) <= _rank(current):
            return
        raise WideningRefused(
            f"Changing the approval mode from {current} to {wanted} widens what the agent may "
            f"do without asking: {self.closed_because}."
        )

    def check_unasked(self, action: str) -> None:
        """Raise :class:`WideningRefused` for ``action`` (which changes files without asking)
        unless the gate is open."""
        if not self.open:
            raise WideningRefused(f"{action} rewrites files without asking: {self.closed_because}.")

    @property
    def allows_always(self) -> bool:
        """Whether an "allow always" answer may be remembered."""
        return self.open

    def refusal(self, what: str) -> str:
        return f"{what} widens what the agent may do without asking: {self.closed_because}."


OPEN_GATE = PermissionGate()


def _rank(mode: str) -> int:
    order = APPROVAL_MODE_ORDER
    return order.index(mode) if mode in order else len(order)  # unknown: the widest


class GatedFrontend(Value):
    """A session's front end as its tool scheduler sees it, behind the session's gate: with the
    gate closed, "allow always" is not offered (and counts once if answered anyway), and a
    change to cairn's own configuration is refused without asking."""

    frontend: Frontend
    gate: PermissionGate

    @property
    def interactive(self) -> bool:
        return self.frontend.interactive

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        if self.gate.open:
            return await self.frontend.request_permission(request)
        if request.strict == "settings":
            _log.warning(self.gate.refusal(f"Approving {request.title}"))
            return "reject"
        outcome = await self.frontend.request_permission(replace(request, allow_always=False))
        return "allow_once" if outcome == "allow_always" else outcome

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        return await self.frontend.ask_user(questions)
