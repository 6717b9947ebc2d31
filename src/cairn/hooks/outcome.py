"""What a hook decided: reading one command's output, and merging several into one outcome.

The JSON a hook prints follows the Claude Code / Qwen Code contract, so existing hook scripts
work unchanged: ``continue``, ``stopReason``, ``reason``, ``decision``, ``systemMessage`` and
``hookSpecificOutput {hookEventName, additionalContext, permissionDecision,
permissionDecisionReason, updatedInput}``. Unknown fields are ignored; a field of the wrong type
is a warning.

``continue: false`` stops the agent (:attr:`HookOutcome.stop`). Before a prompt or a tool call
that also means the prompt is not sent or the tool does not run; after a tool call the turn ends
there; for ``Stop`` and ``SubagentStop`` it wins over a ``decision: "block"`` (the agent stops).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, get_args

from cairn.values import Value
from cairn.vocabulary.events import Notice

if TYPE_CHECKING:
    from cairn.hooks.process import CommandResult

__all__ = [
    "BLOCKED_BY_HOOK",
    "HOOK_EVENTS",
    "NO_REASON",
    "HookDecision",
    "HookEvent",
    "HookOutcome",
    "merge_outcomes",
    "outcome_from_result",
    "sanitize_context",
]

HookEvent: TypeAlias = Literal[
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "Notification",
]
HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
# Events whose hooks may print plain text for the model (as in Claude Code).
_TEXT_IS_CONTEXT: frozenset[HookEvent] = frozenset({"UserPromptSubmit", "SessionStart"})
# Events where ``continue: false`` also refuses what was about to happen.
_STOP_BLOCKS: frozenset[HookEvent] = frozenset({"UserPromptSubmit", "PreToolUse"})
HookDecision: TypeAlias = Literal["allow", "deny", "ask"]

BLOCKING_EXIT_CODE = 2  # exit code that blocks (stderr is the reason)
BLOCKED_BY_HOOK = "Blocked by hook"  # reason of an exit-2 block with empty stderr
NO_REASON = "No reason provided"  # reason of a JSON block that names none
_STDERR_EXCERPT_CHARS = 300  # stderr quoted in a warning about a failed hook
_T = TypeVar("_T")

# Most restrictive wins when hooks disagree.
_DECISION_RANK: dict[HookDecision, int] = {"allow": 1, "ask": 2, "deny": 3}
# Top-level ``decision`` values and what they mean for PreToolUse.
_TOP_LEVEL_DECISIONS: dict[str, HookDecision] = {
    "block": "deny",
    "deny": "deny",
    "allow": "allow",
    "approve": "allow",
    "ask": "ask",
}
_PERMISSION_DECISIONS: tuple[HookDecision, ...] = ("allow", "deny", "ask")


class HookOutcome(Value, frozen=False):
    """The merged verdict of every hook that ran for one event.

    ``blocked``: the prompt is not sent (UserPromptSubmit), the tool does not run (PreToolUse,
    where ``decision`` is then ``"deny"``), the model is told ``reason`` about the call that
    ran (PostToolUse), the agent keeps going with ``reason`` as the next message (Stop,
    SubagentStop), or the conversation is not compressed (PreCompact). ``stop``: a hook said
    ``continue: false`` (``stop_reason`` says why, for the user). ``additional_context`` is
    already escaped for embedding in a prompt. ``updated_input``: PreToolUse's replacement of
    the call's arguments. ``environment``: ``SessionStart``'s ``CLAUDE_ENV_FILE`` exports for
    the session's shell commands.
    """

    blocked: bool = False
    reason: str | None = None
    additional_context: str | None = None
    system_message: str | None = None
    decision: HookDecision | None = None
    warnings: list[str] = field(default_factory=list)
    stop: bool = False
    stop_reason: str | None = None
    updated_input: dict[str, Any] | None = None
    # SessionStart: what the hooks exported in CLAUDE_ENV_FILE (None value: unset)
    environment: dict[str, str | None] | None = None

    def notices(self) -> list[Notice]:
        """What the hooks tell the user: each warning, then their ``systemMessage``."""
        told = [Notice("warning", warning, "hook") for warning in self.warnings]
        if self.system_message:
            told.append(Notice("info", self.system_message, "hook"))
        return told


def sanitize_context(text: str) -> str:
    """Escape angle brackets so hook text cannot open or close a prompt tag."""
    return text.replace("<", "&lt;").replace(">", "&gt;")


def outcome_from_result(event: HookEvent, label: str, result: CommandResult) -> HookOutcome:
    """Interpret one finished (or failed) hook command."""
    where = f"hook {label} ({event})"
    if result.error is not None:
        return HookOutcome(warnings=[f"{where} could not run: {result.error}"])
    if result.timed_out:
        return HookOutcome(
            warnings=[f"{where} timed out after {result.timeout:g}s and was stopped; ignored"]
        )
    warnings = [f"{where} printed more than 1 MB; the rest was dropped"] if result.truncated else []
    if result.exit_code == BLOCKING_EXIT_CODE:
        outcome = _blocking(event, result.stderr.strip() or BLOCKED_BY_HOOK)
        if event in ("PostToolUseFailure",):  # nothing to block: stderr is context for the model
            outcome = HookOutcome(additional_context=sanitize_context(outcome.reason or ""))
    elif result.exit_code == 0:
        outcome = _from_stdout(event, where, result.stdout)
    else:
        excerpt = result.stderr.strip()[:_STDERR_EXCERPT_CHARS]
        detail = f": {excerpt}" if excerpt else ""
        outcome = HookOutcome(
            warnings=[f"{where} exited with code {result.exit_code}; ignored{detail}"]
        )
    outcome.warnings[:0] = warnings
    return outcome


def merge_outcomes(event: HookEvent, outcomes: Sequence[HookOutcome]) -> HookOutcome:
    """Combine parallel hooks: any block blocks, deny > ask > allow, texts are joined in order."""
    merged = HookOutcome(
        blocked=any(o.blocked for o in outcomes),
        additional_context=_join(o.additional_context for o in outcomes),
        system_message=_join(o.system_message for o in outcomes),
        warnings=[w for o in outcomes for w in o.warnings],
        stop=any(o.stop for o in outcomes),
        stop_reason=_join((o.stop_reason for o in outcomes if o.stop), dedupe=True),
    )
    # Several rewrites of a call's input: the last hook in settings order has the last word.
    updated = [o.updated_input for o in outcomes if o.updated_input is not None]
    merged.updated_input = updated[-1] if updated else None
    merged.decision = _most_restrictive(*(o.decision for o in outcomes))
    if merged.blocked:
        merged.reason = _join((o.reason for o in outcomes if o.blocked), dedupe=True)
        if event == "PreToolUse":
            merged.decision = "deny"
    elif merged.decision is not None:
        winners = (o.reason for o in outcomes if o.decision == merged.decision)
        merged.reason = _join(winners, dedupe=True)
    return merged


def _blocking(event: HookEvent, reason: str) -> HookOutcome:
    return HookOutcome(
        blocked=True, reason=reason, decision="deny" if event == "PreToolUse" else None
    )


def _from_stdout(event: HookEvent, where: str, stdout: str) -> HookOutcome:
    text = stdout.strip()
    if not text:
        return HookOutcome()
    try:
        data = _json_object(text)
    except RecursionError:
        return HookOutcome(warnings=[f"{where} printed JSON nested too deeply to read; ignored"])
    if data is not None:
        return _from_json(event, where, data)
    if event in _TEXT_IS_CONTEXT:
        # As in Claude Code: plain text printed by a prompt or session hook is model context.
        return HookOutcome(additional_context=sanitize_context(text))
    return HookOutcome(warnings=[f"{where} printed output that is not a JSON object; ignored"])


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` holds, ``None`` for other text; ``RecursionError`` when it
    is nested too deeply to read."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _from_json(event: HookEvent, where: str, data: Mapping[str, Any]) -> HookOutcome:
    warnings: list[str] = []
    fields = _FieldReader(where, data, warnings)
    stop_reason = fields.string("stopReason")
    reason = fields.string("reason")
    stop = fields.boolean("continue") is False
    top_level = fields.choice("decision", tuple(_TOP_LEVEL_DECISIONS))
    decision = _TOP_LEVEL_DECISIONS[top_level] if top_level is not None else None
    blocked = decision == "deny" or (stop and event in _STOP_BLOCKS)
    if stop and event in ("Stop", "SubagentStop"):
        blocked = False  # continue: false wins: the agent stops

    specific = _specific_output(event, fields)
    context = specific.string("additionalContext") if specific else None
    permission: HookDecision | None = None
    permission_reason: str | None = None
    updated: dict[str, Any] | None = None
    if specific is not None and event == "PreToolUse":
        permission = specific.choice("permissionDecision", _PERMISSION_DECISIONS)
        permission_reason = specific.string("permissionDecisionReason")
        updated = specific.mapping("updatedInput")

    if event == "PreToolUse":
        decision = "deny" if blocked else _most_restrictive(decision, permission)
        blocked = decision == "deny"
    else:
        decision = None
    own_reason = permission_reason if permission is not None and permission == decision else None
    explanation = own_reason or stop_reason or reason
    if blocked:
        explanation = explanation or NO_REASON
    return HookOutcome(
        blocked=blocked,
        reason=explanation if blocked or decision is not None else None,
        additional_context=sanitize_context(context) if context else None,
        system_message=fields.string("systemMessage"),
        decision=decision,
        warnings=warnings,
        stop=stop,
        stop_reason=(stop_reason or reason or NO_REASON) if stop else None,
        updated_input=None if blocked else updated,
    )


def _most_restrictive(*decisions: HookDecision | None) -> HookDecision | None:
    strictest: HookDecision | None = None
    for decision in decisions:
        if decision is not None and (
            strictest is None or _DECISION_RANK[decision] > _DECISION_RANK[strictest]
        ):
            strictest = decision
    return strictest


def _specific_output(event: HookEvent, fields: _FieldReader) -> _FieldReader | None:
    value = fields.data.get("hookSpecificOutput")
    if value is None:
        return None
    if not isinstance(value, Mapping):
        fields.warn("hookSpecificOutput must be an object")
        return None
    specific = _FieldReader(fields.where, value, fields.warnings, prefix="hookSpecificOutput.")
    named = specific.string("hookEventName")
    if named is not None and named != event:
        fields.warn(f"hookSpecificOutput is for {named!r}, not {event!r}")
        return None
    return specific


class _FieldReader:
    """Typed access to a hook's JSON fields; a wrong type is a warning and reads as absent."""

    def __init__(
        self, where: str, data: Mapping[str, Any], warnings: list[str], prefix: str = ""
    ) -> None:
        self.where = where
        self.data = data
        self.warnings = warnings
        self.prefix = prefix

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.where}: {message}; ignored")

    def string(self, key: str) -> str | None:
        return self._typed(key, str, "a string")

    def boolean(self, key: str) -> bool | None:
        return self._typed(key, bool, "true or false")

    def _typed(self, key: str, kind: type[_T], what: str) -> _T | None:
        value = self.data.get(key)
        if value is None or isinstance(value, kind):
            return value
        self.warn(f"`{self.prefix}{key}` must be {what}")
        return None

    def mapping(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, Mapping):
            return dict(value)
        self.warn(f"`{self.prefix}{key}` must be an object")
        return None

    def choice(self, key: str, allowed: tuple[str, ...]) -> Any:
        value = self.string(key)
        if value is None or value in allowed:
            return value
        self.warn(f"`{self.prefix}{key}` must be one of {', '.join(allowed)}, not {value!r}")
        return None


def _join(texts: Any, *, dedupe: bool = False) -> str | None:
    kept: list[str] = []
    for text in texts:
        if text and not (dedupe and text in kept):
            kept.append(text)
    return "\n".join(kept) if kept else None
