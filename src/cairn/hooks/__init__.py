"""Command hooks: shell commands that see an event as JSON and may block, deny or add context.

Configured under ``hooks`` in settings (``UserPromptSubmit``, ``PreToolUse``, ``Stop``); see
``docs/hooks.md`` for the contract.
"""

from cairn.hooks.matcher import ToolMatcher
from cairn.hooks.outcome import HookDecision, HookEvent, HookOutcome, sanitize_context
from cairn.hooks.runner import NO_RESPONSE_TEXT, HookRunner

__all__ = [
    "NO_RESPONSE_TEXT",
    "HookDecision",
    "HookEvent",
    "HookOutcome",
    "HookRunner",
    "ToolMatcher",
    "sanitize_context",
]
