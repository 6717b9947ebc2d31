"""Prompt hooks (``"type": "prompt"``): the model decides, as in Claude Code.

The hook's ``prompt`` is sent once to the fast model (``fastModel``, else the main model; the
hook's ``model`` when it names one), with ``$ARGUMENTS`` replaced by the event as JSON (the JSON
follows the prompt when it has no ``$ARGUMENTS``). The model answers ``{"ok": true}`` or
``{"ok": false, "reason": "..."}``. ``ok: false`` blocks what the event guards, with the reason
for the model: for ``Stop`` and ``SubagentStop`` the agent keeps working with it; for the other
events it also stops the agent, as Claude Code's ``preventContinuation`` does. A model that
fails, times out or answers something else is a warning, and the hook is ignored.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from cairn.hooks.outcome import NO_REASON, HookEvent, HookOutcome, sanitize_context

if TYPE_CHECKING:
    from cairn.llm.types import Provider

__all__ = [
    "ARGUMENTS_PLACEHOLDER",
    "PROMPT_HOOK_EVENTS",
    "PROMPT_HOOK_PURPOSE",
    "PROMPT_HOOK_SYSTEM",
    "ask_model",
]

ARGUMENTS_PLACEHOLDER = "$ARGUMENTS"
PROMPT_HOOK_PURPOSE = "hook"  # the request kind, in the debug log and usage
PROMPT_HOOK_MAX_OUTPUT_TOKENS = 512  # an answer is one small JSON object
DEFAULT_PROMPT_TIMEOUT_SECONDS = 30.0  # Claude Code's default for prompt hooks
# The events a prompt hook can decide (Claude Code's list, as far as cairn has the event).
PROMPT_HOOK_EVENTS: frozenset[HookEvent] = frozenset(
    {"UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop", "SubagentStop"}
)
PROMPT_HOOK_SYSTEM = (
    "You evaluate a hook condition for a coding agent. You get the condition the user wrote and "
    "the event it applies to, as JSON. Decide whether the condition is met. Answer with one JSON "
    'object and nothing else: {"ok": true} when it is met, or {"ok": false, "reason": "..."} '
    "when it is not, the reason saying in one or two sentences what is wrong and what to do."
)
_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["ok"],
}
# Claude Code's model aliases, read as cairn's models: the fast one, or the main one.
_FAST_ALIASES = frozenset({"haiku", "fast", "fast-model"})
_MAIN_ALIASES = frozenset({"sonnet", "opus", "inherit", "default"})
_CONTINUES: frozenset[HookEvent] = frozenset({"Stop", "SubagentStop"})


def question(prompt: str, arguments: str) -> str:
    """The hook's prompt with the event's JSON in place of ``$ARGUMENTS`` (or after it)."""
    if ARGUMENTS_PLACEHOLDER in prompt:
        return prompt.replace(ARGUMENTS_PLACEHOLDER, arguments)
    return f"{prompt}\n\n{arguments}"


def chosen_model(provider: Provider, model: str | None) -> str | None:
    """The model a prompt hook asks: ``None`` for the fast model (side queries' default)."""
    if model is None or not model.strip() or model.strip().lower() in _FAST_ALIASES:
        return None
    if model.strip().lower() in _MAIN_ALIASES:
        return provider.model
    return model.strip()


async def ask_model(
    provider: Provider | None,
    *,
    event: HookEvent,
    where: str,
    prompt: str,
    arguments: str,
    model: str | None,
    timeout: float,
    session_id: str,
) -> HookOutcome:
    """Ask the model one prompt hook's question; its answer as a hook outcome."""
    if provider is None:
        return HookOutcome(warnings=[f"{where}: no model to ask in this session; ignored"])
    from cairn.content import Content
    from cairn.llm.side_query import side_query

    try:
        result = await asyncio.wait_for(
            side_query(
                provider,
                purpose=PROMPT_HOOK_PURPOSE,
                system=PROMPT_HOOK_SYSTEM,
                messages=[Content.user(question(prompt, arguments))],
                max_output_tokens=PROMPT_HOOK_MAX_OUTPUT_TOKENS,
                max_attempts=1,
                json_schema=_ANSWER_SCHEMA,
                model=chosen_model(provider, model),
                session_id=session_id,
            ),
            timeout,
        )
    except TimeoutError:
        return HookOutcome(warnings=[f"{where}: the model did not answer in {timeout:g}s; ignored"])
    except Exception as exc:  # a hook is never a reason for a turn to fail
        return HookOutcome(warnings=[f"{where}: the model could not be asked ({exc}); ignored"])
    return _verdict(event, where, result.data)


def _verdict(event: HookEvent, where: str, data: Any) -> HookOutcome:
    ok = data.get("ok") if isinstance(data, dict) else None
    if not isinstance(ok, bool):
        return HookOutcome(warnings=[f"{where}: the model's answer has no `ok`; ignored"])
    if ok:
        return HookOutcome()
    reason = data.get("reason")
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else NO_REASON
    if event in _CONTINUES:
        return HookOutcome(blocked=True, reason=reason)
    if event == "PostToolUseFailure":  # nothing left to block: the reason is context
        return HookOutcome(
            additional_context=sanitize_context(reason), stop=True, stop_reason=reason
        )
    return HookOutcome(
        blocked=True,
        reason=reason,
        decision="deny" if event == "PreToolUse" else None,
        stop=True,
        stop_reason=reason,
    )
