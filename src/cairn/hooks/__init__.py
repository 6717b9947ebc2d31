"""Command hooks: shell commands that see an event as JSON and may block, deny or add context.

Configured under ``hooks`` in settings (``UserPromptSubmit``, ``PreToolUse``, ``Stop``); see
``docs/hooks.md`` for the contract.

The public names are loaded on first use: a session without hooks never loads the runner's
process and outcome modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ToolMatcher": "matcher",
        "HookDecision": "outcome",
        "HookEvent": "outcome",
        "HookOutcome": "outcome",
        "sanitize_context": "outcome",
        "NO_RESPONSE_TEXT": "runner",
        "HookRunner": "runner",
    },
    __all__,
)
