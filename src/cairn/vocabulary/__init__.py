"""The words every layer of cairn shares: session events, the user-interaction protocol, tool-call
types, token usage and how text from outside is shown on a terminal.

A leaf: it imports nothing of cairn but :mod:`cairn.content`, so tools, the agent, memory and the
session runtime can all speak it without importing each other.
"""

from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    CommandInfo,
    CommandsChanged,
    EventSink,
    MemoryChanged,
    MemoryRecalled,
    MemoryRef,
    ModeChanged,
    ModelChanged,
    Notice,
    PlanUpdate,
    RecapShown,
    SessionEvent,
    SessionTitled,
    StopReason,
    StreamReset,
    ToolCallStart,
    ToolCallUpdate,
    ToolStatus,
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
    Question,
    UserInteraction,
)
from cairn.vocabulary.permissions import (
    PERMISSION_OPTION_IDS,
    PermissionChoice,
    outcome_of_option,
    permission_choices,
)
from cairn.vocabulary.recall import RecallDelivery, RecallPhase
from cairn.vocabulary.terminal import escape_for_terminal
from cairn.vocabulary.tool_calls import ConfirmationKind, FileDiff, Location, TodoItem, ToolKind
from cairn.vocabulary.usage import Usage

__all__ = [
    "PERMISSION_OPTION_IDS",
    "AssistantMessage",
    "AssistantText",
    "AssistantThought",
    "CommandInfo",
    "CommandsChanged",
    "ConfirmationKind",
    "EventSink",
    "FileDiff",
    "Frontend",
    "Location",
    "MemoryChanged",
    "MemoryRecalled",
    "MemoryRef",
    "ModeChanged",
    "ModelChanged",
    "NonInteractive",
    "Notice",
    "PermissionChoice",
    "PermissionOutcome",
    "PermissionRequest",
    "PlanUpdate",
    "Question",
    "RecallDelivery",
    "RecallPhase",
    "RecapShown",
    "SessionEvent",
    "SessionTitled",
    "StopReason",
    "StreamReset",
    "TodoItem",
    "ToolCallStart",
    "ToolCallUpdate",
    "ToolKind",
    "ToolStatus",
    "TurnEnded",
    "TurnResult",
    "TurnStarted",
    "Usage",
    "UsageUpdate",
    "UserInteraction",
    "escape_for_terminal",
    "outcome_of_option",
    "permission_choices",
]
