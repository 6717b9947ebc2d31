"""The session runtime shared by every front end (terminal UI, headless, ACP, daemon).

The runtime's names are loaded on first use: ``cairn serve`` imports
:mod:`cairn.session.startup` to check its settings before it listens, and must not load the
runtime (or even the vocabulary it re-exports) for that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.session.commands import (
        COMMANDS,
        CommandOutcome,
        SlashCommand,
        find_command,
    )
    from cairn.session.runtime import Runtime, SessionNotFound
    from cairn.session.session import PromptRequest, Session
    from cairn.vocabulary.events import (
        AssistantMessage,
        AssistantText,
        AssistantThought,
        EventSink,
        ModeChanged,
        Notice,
        PlanUpdate,
        RecapShown,
        SessionEvent,
        StopReason,
        StreamReset,
        ToolCallStart,
        ToolCallUpdate,
        TurnEnded,
        TurnResult,
        TurnStarted,
        UsageUpdate,
    )
    from cairn.vocabulary.interaction import (
        Frontend,
        NonInteractive,
        PermissionOutcome,
        PermissionRequest,
    )

__all__ = [
    "COMMANDS",
    "AssistantMessage",
    "AssistantText",
    "AssistantThought",
    "CommandOutcome",
    "EventSink",
    "Frontend",
    "ModeChanged",
    "NonInteractive",
    "Notice",
    "PermissionOutcome",
    "PermissionRequest",
    "PlanUpdate",
    "PromptRequest",
    "RecapShown",
    "Runtime",
    "Session",
    "SessionEvent",
    "SessionNotFound",
    "SlashCommand",
    "StopReason",
    "StreamReset",
    "ToolCallStart",
    "ToolCallUpdate",
    "TurnEnded",
    "TurnResult",
    "TurnStarted",
    "UsageUpdate",
    "find_command",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "COMMANDS": "commands",
        "CommandOutcome": "commands",
        "SlashCommand": "commands",
        "find_command": "commands",
        "Runtime": "runtime",
        "SessionNotFound": "runtime",
        "PromptRequest": "session",
        "Session": "session",
        "AssistantMessage": "cairn.vocabulary.events",
        "AssistantText": "cairn.vocabulary.events",
        "AssistantThought": "cairn.vocabulary.events",
        "EventSink": "cairn.vocabulary.events",
        "ModeChanged": "cairn.vocabulary.events",
        "Notice": "cairn.vocabulary.events",
        "PlanUpdate": "cairn.vocabulary.events",
        "RecapShown": "cairn.vocabulary.events",
        "SessionEvent": "cairn.vocabulary.events",
        "StopReason": "cairn.vocabulary.events",
        "StreamReset": "cairn.vocabulary.events",
        "ToolCallStart": "cairn.vocabulary.events",
        "ToolCallUpdate": "cairn.vocabulary.events",
        "TurnEnded": "cairn.vocabulary.events",
        "TurnResult": "cairn.vocabulary.events",
        "TurnStarted": "cairn.vocabulary.events",
        "UsageUpdate": "cairn.vocabulary.events",
        "Frontend": "cairn.vocabulary.interaction",
        "NonInteractive": "cairn.vocabulary.interaction",
        "PermissionOutcome": "cairn.vocabulary.interaction",
        "PermissionRequest": "cairn.vocabulary.interaction",
    },
    __all__,
)
