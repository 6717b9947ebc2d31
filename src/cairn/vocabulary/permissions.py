"""The answers to an approval: one set of options for every front end.

The terminal UI shows them as a dialog, the ACP agent as ``session/request_permission`` options
and the daemon as the ``options`` of a ``permission_request`` event; a vote names an option by
its :attr:`PermissionChoice.id` (ACP's ``optionId``).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from cairn.values import Value
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest
from cairn.vocabulary.tool_names import ToolName

__all__ = [
    "PERMISSION_OPTION_IDS",
    "PermissionChoice",
    "PermissionOptionKind",
    "outcome_of_option",
    "permission_choices",
]

PermissionOptionKind: TypeAlias = Literal["allow_once", "allow_always", "reject_once"]


class PermissionChoice(Value):
    kind: PermissionOptionKind  # ACP's option kind (clients pick icons and hotkeys from it)
    label: str
    outcome: PermissionOutcome  # what the session does with it

    @property
    def id(self) -> str:
        """What a vote names (ACP ``optionId``): the kind, as each kind is offered once."""
        return self.kind


_OUTCOMES: dict[str, PermissionOutcome] = {
    "allow_once": "allow_once",
    "allow_always": "allow_always",
    "reject_once": "reject",
}
PERMISSION_OPTION_IDS = tuple(_OUTCOMES)


def permission_choices(request: PermissionRequest) -> tuple[PermissionChoice, ...]:
    """The answers to ``request``, labelled for its kind of call: allow once, allow always
    (unless it cannot be kept: a strict approval, or a session that may not widen) and reject."""
    always = "Allow always (this session)"
    if request.tool_name == ToolName.SHELL and request.programs:
        always = f"Allow always for {', '.join(request.programs)} (this session)"
    once = PermissionChoice("allow_once", "Allow once", "allow_once")
    reject = PermissionChoice("reject_once", "Reject", "reject")
    if request.strict is not None or not request.allow_always:
        return (once, reject)  # an "always" answer would not be kept: not offered
    return (once, PermissionChoice("allow_always", always, "allow_always"), reject)


def outcome_of_option(option_id: str) -> PermissionOutcome | None:
    """The outcome an option id stands for; ``None`` for an id that is not an option."""
    return _OUTCOMES.get(option_id)
