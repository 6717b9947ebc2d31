"""The one mapper from session events (and replayed recordings) to ``session/update`` payloads.

Every payload is a plain dict in ACP's wire shape (camelCase, the ``update`` object of a
``session/update`` notification). The ACP agent wraps each one into the SDK's model at the edge;
the daemon publishes it as the ``data`` of a ``session_update`` envelope. Both read the same
payloads, so an editor and a daemon client never disagree about what happened.

Payloads hold no ``None`` values and no field at its schema default, so that a round trip through
the ACP SDK's models gives back exactly the same dict (a test checks this).

Beyond ACP's own fields, two things ride in ``_meta.cairn`` (clients that do not know it show the
plain text):

- a notice (hook message, command output, warning) is an ``agent_message_chunk`` of its own
  message with ``_meta.cairn = {"kind": "notice", "level", "source"}``;
- a recap (``/recap``, the away recap, or one replayed from a recording) is an
  ``agent_message_chunk`` of its own message with ``_meta.cairn = {"kind": "recap", "text",
  "replayed"}``;
- memory at work (memories recalled into a turn; memories saved, updated or removed by Extract,
  Dream, ``/remember`` or ``/forget``) is an ``agent_message_chunk`` of its own message with
  ``_meta.cairn = {"kind": "memory", "action": "recalled" | "changed", "memories": [{"name",
  "scope", "relativePath", "path"}], ...}`` (``phase`` for recalled; ``operation``, ``saved``,
  ``updated``, ``removed`` for changed).

Text and thoughts carry a ``messageId``: each model response, notice and recap is its own message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    CommandsChanged,
    MemoryChanged,
    MemoryRecalled,
    MemoryRef,
    ModeChanged,
    Notice,
    PlanUpdate,
    RecapShown,
    SessionEvent,
    StreamReset,
    ToolCallStart,
    ToolCallUpdate,
    TurnStarted,
    UsageUpdate,
)
from cairn.vocabulary.permissions import permission_choices

if TYPE_CHECKING:
    from cairn.recording.replay import ReplayItem
    from cairn.tools.registry import ToolRegistry
    from cairn.vocabulary.interaction import PermissionRequest
    from cairn.vocabulary.tool_calls import FileDiff, Location, TodoItem

__all__ = [
    "ACP_TOOL_KINDS",
    "MAX_TOOL_TEXT_CHARS",
    "MODE_DESCRIPTIONS",
    "RECAP_PREFIX",
    "ListedCommand",
    "Payload",
    "UpdateMapper",
    "acp_kind",
    "clip_tool_text",
    "commands_update",
    "describe_call",
    "diff_content",
    "mode_state",
    "mode_update",
    "permission_options",
    "permission_tool_call",
    "plan_update",
]

Payload: TypeAlias = dict[str, Any]

MAX_TOOL_TEXT_CHARS = 50_000  # tool output shown to people per call (the model gets it all)
RECAP_PREFIX = "※ recap: "  # how a recap reads in a client that shows only text
ACP_TOOL_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode"}
) | {"other"}
MODE_DESCRIPTIONS: dict[str, tuple[str, str]] = {  # approval mode -> (name, description)
    "plan": ("Plan", "Read and plan only: no edits and no commands."),
    "default": ("Default", "Ask before edits and commands."),
    "auto-edit": ("Auto edit", "Edit files without asking; ask before commands."),
    "yolo": ("YOLO", "Never ask: run every tool call."),
}
_NOTICE_PREFIX = {"info": "", "warning": "⚠ ", "error": "✗ "}
_PLAN_STATUSES = frozenset(("pending", "in_progress", "completed"))  # ACP has no "cancelled"


class UpdateMapper:
    """Payloads for one session's stream of events (one per session and client connection).

    It keeps the message being streamed, so each model response, notice and recap gets its own
    ``messageId``; ``new_id`` makes the ids (UUIDs by default).
    """

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        *,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._registry = registry
        self._new_id = new_id
        self._message: str | None = None  # the agent message being streamed
        self._thought: str | None = None  # the thought being streamed

    def event(self, event: SessionEvent) -> list[Payload]:
        """The payloads for one session event (none for events a client needs no update for)."""
        match event:
            case AssistantText(text=text) if text:
                if self._message is None:
                    self._message = self._new_id()
                return [_chunk("agent_message_chunk", text, self._message)]
            case AssistantThought(text=text) if text:
                if self._thought is None:
                    self._thought = self._new_id()
                return [_chunk("agent_thought_chunk", text, self._thought)]
            case AssistantMessage() | StreamReset() | TurnStarted():
                self._end_message()  # the next text is another model response
            case ToolCallStart():
                self._end_message()
                return [_tool_call_start(event)]
            case ToolCallUpdate():
                return [_tool_call_update(event)]
            case PlanUpdate(todos=todos):
                return [plan_update(todos)]
            case Notice():
                return [self._own_message(notice_text(event), _notice_meta(event))]
            case RecapShown(text=text):
                return [self._recap(text, replayed=False)]
            case MemoryRecalled(memories=memories) if memories:
                meta = _memory_meta("recalled", memories, phase=event.phase)
                return [self._own_message(f"{event.describe()}\n\n", meta)]
            case MemoryChanged() if event.memories:
                meta = _memory_meta("changed", event.memories, operation=event.operation)
                meta["saved"] = [ref.relative_path for ref in event.saved]
                meta["updated"] = [ref.relative_path for ref in event.updated]
                meta["removed"] = [ref.relative_path for ref in event.removed]
                return [self._own_message(f"{event.describe()}\n\n", meta)]
            case ModeChanged(approval_mode=mode):
                return [mode_update(mode)]
            case CommandsChanged(commands=commands):
                return [commands_update(commands)]
            case UsageUpdate(context_tokens=used, context_window=size) if size > 0:
                return [{"sessionUpdate": "usage_update", "used": max(used, 0), "size": size}]
        return []

    def replay(self, items: Iterable[ReplayItem]) -> list[Payload]:
        """What the person saw in a recorded session, in order (``session/load``, daemon load)."""
        payloads: list[Payload] = []
        for item in items:
            payloads.extend(self._replay_item(item))
        self._end_message()
        return payloads

    def _replay_item(self, item: ReplayItem) -> list[Payload]:
        self._end_message()
        if item.kind == "user_text":
            return [_chunk("user_message_chunk", item.text, self._new_id())]
        if item.kind == "assistant_text":
            return [_chunk("agent_message_chunk", item.text, self._new_id())]
        if item.kind == "thought":
            return [_chunk("agent_thought_chunk", item.text, self._new_id())]
        if item.kind == "recap":
            return [self._recap(item.text, replayed=True)]
        if item.kind == "tool_call" and item.tool_call_id:
            return self._replayed_tool_call(item)
        return []

    def _replayed_tool_call(self, item: ReplayItem) -> list[Payload]:
        call_id = item.tool_call_id or ""
        name = item.tool_name or "tool"
        title, kind = describe_call(self._registry, name, item.args)
        start: Payload = {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": title,
            "kind": acp_kind(kind),
            "status": "pending",
            "rawInput": dict(item.args),
        }
        if item.result is None and item.error is None:
            return [start]  # never answered (an interrupted turn)
        text = item.error if item.error is not None else (item.display or item.result)
        done: Payload = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": "failed" if item.error is not None else "completed",
        }
        if text:
            done["content"] = [_text_content(clip_tool_text(text))]
        return [start, done]

    def _recap(self, text: str, *, replayed: bool) -> Payload:
        meta = {"kind": "recap", "text": text, "replayed": replayed}
        return self._own_message(f"{RECAP_PREFIX}{text}\n\n", meta)

    def _own_message(self, text: str, meta: Mapping[str, Any]) -> Payload:
        self._end_message()
        payload = _chunk("agent_message_chunk", text, self._new_id())
        payload["_meta"] = {"cairn": dict(meta)}
        return payload

    def _end_message(self) -> None:
        self._message = None
        self._thought = None


def notice_text(notice: Notice) -> str:
    """A notice as its own paragraph of text."""
    return f"{_NOTICE_PREFIX.get(notice.level, '')}{notice.text}\n\n"


def _notice_meta(notice: Notice) -> dict[str, Any]:
    return {"kind": "notice", "level": notice.level, "source": notice.source}


def _memory_meta(action: str, memories: Sequence[MemoryRef], **extra: str) -> dict[str, Any]:
    """``_meta.cairn`` of a memory item: what happened and to which memories (name and file)."""
    listed = [
        {"name": ref.name, "scope": ref.scope, "relativePath": ref.relative_path, "path": ref.path}
        for ref in memories
    ]
    return {"kind": "memory", "action": action, **extra, "memories": listed}


def _chunk(kind: str, text: str, message_id: str) -> Payload:
    content = {"type": "text", "text": text}
    return {"sessionUpdate": kind, "content": content, "messageId": message_id}


def _text_content(text: str) -> Payload:
    return {"type": "content", "content": {"type": "text", "text": text}}


# ----- tool calls -----


def acp_kind(kind: str) -> str:
    """A tool kind as one of ACP's kinds (``other`` for anything ACP does not name)."""
    return kind if kind in ACP_TOOL_KINDS else "other"


def describe_call(
    registry: ToolRegistry | None, name: str, args: Mapping[str, Any]
) -> tuple[str, str]:
    """(title, kind) of a call to ``name``, as the live call showed it; the name if unknown."""
    tool = registry.get(name) if registry is not None else None
    if tool is None:
        return name, "other"
    try:
        return tool.title(args), str(tool.kind)
    except Exception:  # a title is cosmetic: a broken one never breaks a replay
        return name, str(tool.kind)


def clip_tool_text(text: str) -> str:
    """Tool output cut to :data:`MAX_TOOL_TEXT_CHARS`, saying how much was left out."""
    if len(text) <= MAX_TOOL_TEXT_CHARS:
        return text
    hidden = len(text) - MAX_TOOL_TEXT_CHARS
    return f"{text[:MAX_TOOL_TEXT_CHARS]}\n… ({hidden} more characters not shown)"


def diff_content(diff: FileDiff) -> Payload:
    content: Payload = {"type": "diff", "path": str(diff.path), "newText": diff.new_text}
    if diff.old_text is not None:
        content["oldText"] = diff.old_text
    return content


def _locations(locations: Iterable[Location]) -> list[Payload]:
    out: list[Payload] = []
    for location in locations:
        entry: Payload = {"path": str(location.path)}
        if location.line is not None:
            entry["line"] = location.line
        out.append(entry)
    return out


def _tool_call_start(event: ToolCallStart) -> Payload:
    payload: Payload = {
        "sessionUpdate": "tool_call",
        "toolCallId": event.call_id,
        "title": event.title,
        "kind": acp_kind(str(event.kind)),
        "status": "pending",
        "rawInput": dict(event.args),
    }
    if event.locations:
        payload["locations"] = _locations(event.locations)
    return payload


def _tool_call_update(event: ToolCallUpdate) -> Payload:
    payload: Payload = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": event.call_id,
        "status": "failed" if event.status == "cancelled" else event.status,  # not in ACP
    }
    content: list[Payload] = []
    if event.diff is not None:
        content.append(diff_content(event.diff))
    else:
        failed = event.status in ("failed", "cancelled")
        shown = (event.output if failed else event.display) or event.output
        if shown:
            content.append(_text_content(clip_tool_text(shown)))
    if content:
        payload["content"] = content
    if event.locations:
        payload["locations"] = _locations(event.locations)
    return payload


def permission_tool_call(request: PermissionRequest) -> Payload:
    """The ``toolCall`` of a permission request: the call being approved, with its diff."""
    payload: Payload = {
        "toolCallId": request.call_id,
        "title": request.title,
        "kind": acp_kind(str(request.kind)),
        "status": "pending",
        "rawInput": dict(request.args),
    }
    if request.diff is not None:
        payload["content"] = [diff_content(request.diff)]
    return payload


def permission_options(request: PermissionRequest) -> list[Payload]:
    """The ``options`` of a permission request (see :func:`permission_choices`)."""
    return [
        {"optionId": c.id, "name": c.label, "kind": c.kind} for c in permission_choices(request)
    ]


# ----- plans, commands and modes -----


def plan_update(todos: Sequence[TodoItem]) -> Payload:
    """The todo list as an ACP plan; cancelled items are left out (ACP has no such status)."""
    entries = [
        {"content": todo.content, "priority": "medium", "status": todo.status}
        for todo in todos
        if todo.status in _PLAN_STATUSES
    ]
    return {"sessionUpdate": "plan", "entries": entries}


class ListedCommand(Protocol):
    """A slash command as a client lists it (a ``SlashCommand`` or a ``CommandInfo``)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def hint(self) -> str | None: ...


def commands_update(commands: Iterable[ListedCommand]) -> Payload:
    """``available_commands_update``: the slash commands a client can offer."""
    listed: list[Payload] = []
    for command in commands:
        entry: Payload = {"name": command.name, "description": command.description}
        if command.hint:
            entry["input"] = {"hint": command.hint}
        listed.append(entry)
    return {"sessionUpdate": "available_commands_update", "availableCommands": listed}


def mode_update(mode: str) -> Payload:
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode}


def mode_state(current: str, modes: Sequence[str]) -> Payload:
    """The approval modes as ACP's ``modes`` (``session/new`` and ``session/load`` answers)."""
    available: list[Payload] = []
    for mode in modes:
        name, description = MODE_DESCRIPTIONS.get(mode, (mode, ""))
        entry: Payload = {"id": mode, "name": name}
        if description:
            entry["description"] = description
        available.append(entry)
    return {"currentModeId": current, "availableModes": available}
