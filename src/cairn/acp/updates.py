"""``session/update`` payloads: session events, replayed history, commands and modes in ACP shapes.

Pure functions from cairn's own types to the SDK's schema models; nothing here sends anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from acp.helpers import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_available_commands,
    update_current_mode,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    CurrentModeUpdate,
    SessionMode,
    SessionModeState,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UnstructuredCommandInput,
    UsageUpdate,
    UserMessageChunk,
)

from cairn.vocabulary.events import (
    AssistantText,
    AssistantThought,
    ModeChanged,
    Notice,
    PlanUpdate,
    SessionEvent,
    ToolCallUpdate,
)
from cairn.vocabulary.events import ToolCallStart as CairnToolCallStart
from cairn.vocabulary.events import UsageUpdate as CairnUsageUpdate

if TYPE_CHECKING:
    from cairn.recording.replay import ReplayItem
    from cairn.session.commands import SlashCommand
    from cairn.tools.base import FileDiff, Location, TodoItem

__all__ = [
    "MAX_TOOL_TEXT_CHARS",
    "MODE_DESCRIPTIONS",
    "Describe",
    "SessionUpdate",
    "available_commands",
    "event_update",
    "mode_state",
    "replay_updates",
]

MAX_TOOL_TEXT_CHARS = 50_000  # tool output shown in the editor per call (the model gets it all)
MODE_DESCRIPTIONS: dict[str, tuple[str, str]] = {  # approval mode -> (name, description)
    "plan": ("Plan", "Read and plan only: no edits and no commands."),
    "default": ("Default", "Ask before edits and commands."),
    "auto-edit": ("Auto edit", "Edit files without asking; ask before commands."),
    "yolo": ("YOLO", "Never ask: run every tool call."),
}
_NOTICE_PREFIX = {"info": "", "warning": "⚠ ", "error": "✗ "}
_PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}
_ACP_KINDS = frozenset(
    ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode")
) | {"other"}

# (tool name, arguments) -> (title, ACP kind) of a replayed call
Describe: TypeAlias = Callable[[str, Mapping[str, Any]], tuple[str, str]]

SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | UsageUpdate
)


def event_update(event: SessionEvent) -> SessionUpdate | None:
    """The ``session/update`` for one session event, or ``None`` when the client needs none."""
    match event:
        case AssistantText(text=text) if text:
            return update_agent_message_text(text)
        case AssistantThought(text=text) if text:
            return update_agent_thought_text(text)
        case CairnToolCallStart():
            return _tool_call_start(event)
        case ToolCallUpdate():
            return _tool_call_update(event)
        case PlanUpdate(todos=todos):
            return plan_update(todos)
        case Notice():
            return update_agent_message_text(notice_text(event))
        case ModeChanged(approval_mode=mode):
            return update_current_mode(mode)
        case CairnUsageUpdate(context_tokens=used, context_window=size) if size > 0:
            return UsageUpdate(session_update="usage_update", used=max(used, 0), size=size)
    return None


def notice_text(notice: Notice) -> str:
    """A notice as its own paragraph of the agent's message."""
    return f"{_NOTICE_PREFIX.get(notice.level, '')}{notice.text}\n\n"


def plan_update(todos: Sequence[TodoItem]) -> AgentPlanUpdate:
    """The todo list as an ACP plan; cancelled items are left out (ACP has no such status)."""
    return update_plan(
        plan_entry(todo.content, status=_PLAN_STATUS[todo.status])  # type: ignore[arg-type]
        for todo in todos
        if todo.status in _PLAN_STATUS
    )


def _tool_call_start(event: CairnToolCallStart) -> ToolCallStart:
    return start_tool_call(
        event.call_id,
        event.title,
        kind=acp_kind(str(event.kind)),  # type: ignore[arg-type]
        status="pending",
        locations=_locations(event.locations),
        raw_input=dict(event.args),
    )


def _tool_call_update(event: ToolCallUpdate) -> ToolCallProgress:
    status = "failed" if event.status == "cancelled" else event.status
    content: list[Any] = []
    if event.diff is not None:
        content.append(diff_content(event.diff))
    shown = event.output if event.status in ("failed", "cancelled") else event.display
    shown = shown or event.output
    if shown and event.diff is None:
        content.append(tool_content(text_block(_clip(shown))))
    return update_tool_call(
        event.call_id,
        status=status,
        content=content or None,
        locations=_locations(event.locations) or None,
    )


def diff_content(diff: FileDiff) -> Any:
    return tool_diff_content(str(diff.path), diff.new_text, diff.old_text)


def acp_kind(kind: str) -> str:
    return kind if kind in _ACP_KINDS else "other"


def _locations(locations: Iterable[Location]) -> list[ToolCallLocation]:
    return [ToolCallLocation(path=str(loc.path), line=loc.line) for loc in locations]


def _clip(text: str) -> str:
    if len(text) <= MAX_TOOL_TEXT_CHARS:
        return text
    hidden = len(text) - MAX_TOOL_TEXT_CHARS
    return f"{text[:MAX_TOOL_TEXT_CHARS]}\n… ({hidden} more characters not shown)"


# ----- commands and modes -----


def available_commands(commands: Iterable[SlashCommand]) -> AvailableCommandsUpdate:
    return update_available_commands(
        AvailableCommand(
            name=command.name,
            description=command.description,
            input=AvailableCommandInput(UnstructuredCommandInput(hint=command.hint))
            if command.hint
            else None,
        )
        for command in commands
    )


def mode_state(current: str, modes: Sequence[str]) -> SessionModeState:
    return SessionModeState(
        current_mode_id=current,
        available_modes=[
            SessionMode(
                id=mode,
                name=MODE_DESCRIPTIONS.get(mode, (mode, ""))[0],
                description=MODE_DESCRIPTIONS.get(mode, ("", ""))[1] or None,
            )
            for mode in modes
        ],
    )


# ----- replay of a loaded session -----


def replay_updates(items: Iterable[ReplayItem], describe: Describe) -> list[SessionUpdate]:
    """What the person saw in a recorded session, in order (ACP ``session/load``)."""
    updates: list[SessionUpdate] = []
    for item in items:
        updates.extend(_replay_item(item, describe))
    return updates


def _replay_item(item: ReplayItem, describe: Describe) -> list[SessionUpdate]:
    if item.kind == "user_text":
        return [update_user_message_text(item.text)]
    if item.kind == "assistant_text":
        return [update_agent_message_text(item.text)]
    if item.kind == "thought":
        return [update_agent_thought_text(item.text)]
    if item.kind == "recap":
        return [update_agent_message_text(f"※ recap: {item.text}\n\n")]
    if item.kind == "tool_call" and item.tool_call_id:
        return _replayed_tool_call(item, describe)
    return []


def _replayed_tool_call(item: ReplayItem, describe: Describe) -> list[SessionUpdate]:
    title, kind = describe(item.tool_name or "tool", item.args)
    start = start_tool_call(
        item.tool_call_id or "",
        title,
        kind=acp_kind(kind),  # type: ignore[arg-type]
        status="pending",
        raw_input=dict(item.args),
    )
    if item.result is None and item.error is None:
        return [start]  # never answered (an interrupted turn)
    text = item.error if item.error is not None else item.result
    done = update_tool_call(
        item.tool_call_id or "",
        status="failed" if item.error is not None else "completed",
        content=[tool_content(text_block(_clip(text or "")))] if text else None,
    )
    return [start, done]
