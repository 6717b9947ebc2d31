"""The session runtime shared by every front end (terminal UI, headless, ACP, daemon).

The runtime's names are loaded on first use: ``cairn serve`` imports
:mod:`cairn.session.startup` to check its settings before it listens, and must not load the
runtime for that. The words a session speaks (its events, the ``Frontend`` protocol) are in
:mod:`cairn.vocabulary`; ``TurnResult`` is re-exported here for ``cairn.TurnResult``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.session.attachments import Attachments
    from cairn.session.commands import COMMANDS, CommandOutcome, SlashCommand, find_command
    from cairn.session.context_usage import context_report, usage_report
    from cairn.session.runtime import Runtime, SessionNotFound
    from cairn.session.session import PromptRequest, Session
    from cairn.session.turn_hooks import TurnHook
    from cairn.session.updates import UpdateMapper
    from cairn.vocabulary.events import TurnResult

__all__ = [
    "COMMANDS",
    "Attachments",
    "CommandOutcome",
    "PromptRequest",
    "Runtime",
    "Session",
    "SessionNotFound",
    "SlashCommand",
    "TurnHook",
    "TurnResult",
    "UpdateMapper",
    "context_report",
    "find_command",
    "usage_report",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Attachments": "attachments",
        "COMMANDS": "commands",
        "CommandOutcome": "commands",
        "SlashCommand": "commands",
        "find_command": "commands",
        "context_report": "context_usage",
        "usage_report": "context_usage",
        "Runtime": "runtime",
        "SessionNotFound": "runtime",
        "PromptRequest": "session",
        "Session": "session",
        "TurnHook": "turn_hooks",
        "UpdateMapper": "updates",
        "TurnResult": "cairn.vocabulary.events",
    },
    __all__,
)
