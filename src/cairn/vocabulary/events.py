"""Events a session streams to its front end while a turn runs.

Every front end renders the same events its own way: headless prints text or JSON lines, the ACP
agent sends ``session/update`` notifications, the daemon fans them out over SSE, the terminal UI
draws widgets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field
from typing import Any, Literal, TypeAlias

from cairn.content import FunctionCall
from cairn.values import Value
from cairn.vocabulary.retries import describe_retry
from cairn.vocabulary.tool_calls import FileDiff, Location, TodoItem, ToolKind
from cairn.vocabulary.usage import Usage

__all__ = [
    "AssistantMessage",
    "AssistantText",
    "AssistantThought",
    "CommandInfo",
    "CommandsChanged",
    "EventSink",
    "MemoryChanged",
    "MemoryOperation",
    "MemoryRecalled",
    "MemoryRef",
    "ModeChanged",
    "ModelChanged",
    "Notice",
    "PlanUpdate",
    "RecapShown",
    "SessionEvent",
    "SessionTitled",
    "StopReason",
    "StreamReset",
    "SubagentUpdate",
    "ToolCallStart",
    "ToolCallUpdate",
    "ToolEnding",
    "ToolStatus",
    "TurnEnded",
    "TurnResult",
    "TurnStarted",
    "UsageUpdate",
]

StopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"
]
ToolStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
# Why a call ended ``cancelled``: the user rejected it, an earlier rejection skipped it, or its
# turn was cancelled while it waited for approval.
ToolEnding: TypeAlias = Literal["rejected", "skipped", "cancelled"]


class TurnStarted(Value):
    prompt_id: str
    fresh: bool


class AssistantText(Value):
    text: str  # a streamed fragment


class AssistantThought(Value):
    text: str  # a streamed fragment of reasoning


class AssistantMessage(Value):
    """One complete model response (after its text streamed): for transcripts and JSON output.

    ``finish_reason`` is why the model stopped: ``stop``, ``tool_calls``, ``length`` (cut at its
    output bound), ``filter`` (a content filter), or the endpoint's own word."""

    text: str
    thought: str
    calls: tuple[FunctionCall, ...]
    usage: Usage
    model: str
    finish_reason: str = "stop"


class StreamReset(Value):
    """The model request is being retried: discard the text streamed since the last request.

    ``attempt`` is the attempt about to start, of ``max_attempts`` (0: not known).
    """

    reason: str
    delay: float
    attempt: int = 0
    max_attempts: int = 0

    def describe(self) -> str:
        return describe_retry(self.delay, self.attempt, self.max_attempts, self.reason)


class ToolCallStart(Value):
    call_id: str
    name: str
    title: str
    kind: ToolKind
    args: Mapping[str, Any]
    locations: tuple[Location, ...] = ()


class ToolCallUpdate(Value):
    call_id: str
    status: ToolStatus
    output: str | None = None  # what the model sees
    display: str | None = None  # a short summary for people
    diff: FileDiff | None = None
    locations: tuple[Location, ...] = ()
    # The permission system refused the call (a deny rule, plan mode, no one to ask, a
    # PreToolUse hook, the user); ``output`` says why.
    denied: bool = False
    ending: ToolEnding | None = None  # set with status "cancelled"
    terminal_id: str | None = None  # the client terminal the command runs in (ACP)


class PlanUpdate(Value):
    todos: tuple[TodoItem, ...]


class Notice(Value):
    """Something the user should see that is not the model's answer."""

    level: Literal["info", "warning", "error"]
    text: str
    source: str = ""  # "hook", "compression", "loop", "retry", "recap", "memory", ...


class RecapShown(Value):
    """A "where were we" recap joined the conversation (``/recap`` or the away recap)."""

    text: str
    away: bool = False  # generated because the user came back, not asked for


class SessionTitled(Value):
    """The session has a (new) title: the first prompt's first line, then the model's."""

    title: str
    source: Literal["prompt", "model"] = "prompt"


class CommandInfo(Value):
    """A slash command as a front end lists it (completion, ACP ``available_commands``)."""

    name: str
    description: str
    hint: str | None = None  # what the argument is


class CommandsChanged(Value):
    """The session's slash commands changed (an MCP server's prompts, command files ...)."""

    commands: tuple[CommandInfo, ...]


class MemoryRef(Value):
    """One memory as people see it: its name and where its file is."""

    name: str  # the memory's title (front matter `name`)
    scope: Literal["project", "user"]
    relative_path: str  # POSIX, in its memory folder ("feedback/uv.md")
    path: str  # the absolute file path, to open it
    note: str = ""  # "possibly stale: learned on … from src/x.py, which has changed since"

    @property
    def shown(self) -> str:
        """The name, marked when the memory may be stale or cannot be verified."""
        return f"{self.name} ({self.note.split(':', 1)[0]})" if self.note else self.name


class MemoryRecalled(Value):
    """Recall put these memories into the turn's request (the fast result, or the refined one
    with the next tool results). Shown as a quiet history item, never as assistant text."""

    memories: tuple[MemoryRef, ...]
    phase: Literal["fast", "refined"] = "fast"

    def describe(self) -> str:
        """One line for people: ``Recalled 2 memories: Prefers uv; Deploy checklist``."""
        count = len(self.memories)
        names = "; ".join(ref.shown for ref in self.memories)
        return f"Recalled {count} {'memory' if count == 1 else 'memories'}: {names}"


MemoryOperation: TypeAlias = Literal["extract", "dream", "remember", "forget", "restore"]


class MemoryChanged(Value):
    """Memories saved, updated or removed by Extract, Dream, ``/remember``, ``/forget`` or a
    restore. Also sent outside a turn: Extract finishes after the answer."""

    operation: MemoryOperation
    saved: tuple[MemoryRef, ...] = ()  # new (or restored) memories
    updated: tuple[MemoryRef, ...] = ()
    removed: tuple[MemoryRef, ...] = ()  # forgotten or deleted (to the trash)

    @property
    def memories(self) -> tuple[MemoryRef, ...]:
        return (*self.saved, *self.updated, *self.removed)

    def describe(self) -> str:
        """One line per memory for people: what happened, its name, its file, how to open it."""
        by = _MEMORY_OPERATION_WORDS[self.operation]
        lines = [
            f"Saved to memory ({by}): {ref.name} — {ref.path} ({_show_command(ref)})"
            for ref in self.saved
        ]
        lines += [
            f"Updated in memory ({by}): {ref.name} — {ref.path} ({_show_command(ref)})"
            for ref in self.updated
        ]
        lines += [
            f"Removed from memory ({by}): {ref.name} — in the trash; "
            "`cairn memory restore` brings it back"
            for ref in self.removed
        ]
        return "\n".join(lines)


_MEMORY_OPERATION_WORDS: dict[str, str] = {
    "extract": "Extract",
    "dream": "Dream",
    "remember": "/remember",
    "forget": "/forget",
    "restore": "restore",
}


def _show_command(ref: MemoryRef) -> str:
    return f"`cairn memory show {ref.scope}:{ref.relative_path}`"


class UsageUpdate(Value):
    usage: Usage
    context_tokens: int
    context_window: int


class ModeChanged(Value):
    approval_mode: str


class ModelChanged(Value, frozen=False):
    """The session's model changed (``/model``, an editor's model menu, the daemon's route)."""

    model: str


class TurnResult(Value, frozen=False):
    stop_reason: StopReason
    text: str = ""  # the final assistant text of the turn
    usage: Usage = field(default_factory=Usage)
    requests: int = 0  # model requests made in this turn
    fresh: bool = False
    loop_type: str | None = None  # set when loop protection stopped the turn
    error: str | None = None
    error_status: int | None = None
    handled_locally: bool = False  # a slash command answered without the model
    unknown_command: bool = False  # the prompt was a command line naming no command
    blocked: bool = False  # refused before the model: a UserPromptSubmit hook, a command step
    limit: str | None = None  # "max_session_turns" | "session_token_limit" | "max_requests"
    # Why the model stopped when it did not simply finish: "length" (cut at its output bound:
    # stop_reason max_tokens), "filter" (a content filter: refusal), or the endpoint's own word.
    finish_reason: str | None = None

    @property
    def loop_stopped(self) -> bool:
        return self.loop_type is not None


class TurnEnded(Value):
    result: TurnResult


class SubagentUpdate(Value):
    """Something a subagent did while the ``agent`` call ``parent_call_id`` runs it: one of its
    own events (a tool call starting or ending, a whole answer, a notice). Front ends show it
    under that call."""

    parent_call_id: str
    agent_id: str
    agent_type: str
    event: SessionEvent


SessionEvent: TypeAlias = (
    TurnStarted
    | AssistantText
    | AssistantThought
    | AssistantMessage
    | StreamReset
    | ToolCallStart
    | ToolCallUpdate
    | PlanUpdate
    | Notice
    | RecapShown
    | SessionTitled
    | MemoryRecalled
    | MemoryChanged
    | UsageUpdate
    | ModeChanged
    | ModelChanged
    | CommandsChanged
    | SubagentUpdate
    | TurnEnded
)
EventSink: TypeAlias = Callable[[SessionEvent], Awaitable[None]]
