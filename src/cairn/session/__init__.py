"""The session runtime shared by every front end (terminal UI, headless, ACP, daemon)."""

from cairn.session.commands import COMMANDS, CommandOutcome, SlashCommand, find_command
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
