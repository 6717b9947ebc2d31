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

- a subagent's work (:class:`~cairn.vocabulary.events.SubagentUpdate`) is a
  ``tool_call_update`` of the ``agent`` call that runs it: its ``content`` lists the subagent's
  steps so far (an editor shows them inside the call), and ``_meta.cairn = {"kind":
  "subagent", "parentToolCallId", "agentId", "agentType", "updates": [...]}`` carries the
  subagent's own event as payloads of this same shape (its tool calls, its answers). When the
  ``agent`` call ends, its content is the list of steps, then the answer.

Text and thoughts carry a ``messageId``: each model response, notice and recap is its own message.

The session's settings an editor builds menus from are ACP ``configOptions``
(:func:`~cairn.session.menus.config_options`: the model and the approval mode); a mapper given
``config`` sends the whole list again as a ``config_option_update`` whenever either changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cairn.content import clip_text
from cairn.ids import new_uuid
from cairn.recording.reader import ASK_USER_TOOL
from cairn.session.menus import (
    MODE_DESCRIPTIONS,
    ListedCommand,
    Payload,
    commands_update,
    config_option_update,
    config_options,
    mode_state,
    mode_update,
    session_config_options,
)
from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    CommandsChanged,
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
    StreamReset,
    SubagentUpdate,
    ToolCallStart,
    ToolCallUpdate,
    TurnEnded,
    TurnStarted,
    UsageUpdate,
)
from cairn.vocabulary.permissions import permission_choices
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.recording.replay import ReplayItem
    from cairn.tools.registry import ToolRegistry
    from cairn.vocabulary.events import ToolEnding, TurnResult
    from cairn.vocabulary.interaction import PermissionRequest
    from cairn.vocabulary.tool_calls import FileDiff, Location, TodoItem

__all__ = [
    "ACP_TOOL_KINDS",
    "ENDING_TEXT",
    "MAX_TOOL_TEXT_CHARS",
    "MODE_DESCRIPTIONS",
    "PARAGRAPH_BREAK",
    "RECAP_PREFIX",
    "ListedCommand",
    "Payload",
    "ToolEnd",
    "UpdateMapper",
    "acp_kind",
    "clip_tool_text",
    "commands_update",
    "config_option_update",
    "config_options",
    "describe_call",
    "diff_content",
    "mode_state",
    "mode_update",
    "permission_options",
    "permission_tool_call",
    "plan_update",
    "recorded_plan",
    "retry_text",
    "session_config_options",
    "tool_call_end",
]

MAX_TOOL_TEXT_CHARS = 50_000  # tool output shown to people per call (the model gets it all)
PARAGRAPH_BREAK = "\n\n"  # before the text of a turn's next model response
TODO_WRITE_TOOL = ToolName.TODO_WRITE  # its calls make the plan
RECAP_PREFIX = "※ recap: "  # how a recap reads in a client that shows only text
ACP_TOOL_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode"}
) | {"other"}
_NOTICE_PREFIX = {"info": "", "warning": "⚠ ", "error": "✗ "}
_PLAN_STATUSES = frozenset(("pending", "in_progress", "completed"))  # ACP has no "cancelled"
MAX_SUBAGENT_STEPS_SHOWN = 25  # a subagent's latest steps listed under its call
_STEP_MARKS = {"completed": "✓", "failed": "✗", "cancelled": "✗"}  # else "…" (running)
_TERMINAL = frozenset(("completed", "failed", "cancelled"))


@dataclass
class _OpenCall:
    """A tool call the stream started and has not ended yet."""

    title: str
    kind: str
    terminal_id: str | None = None


class UpdateMapper:
    """Payloads for one session's stream of events (one per session and client connection).

    It keeps the message being streamed, so each model response, notice and recap gets its own
    ``messageId``; ``new_id`` makes the ids (UUIDs by default). It also keeps the tool calls
    still open, so a turn that ends (cancelled, failed) ends each of them too: no call stays
    pending in a client.
    """

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        *,
        new_id: Callable[[], str] = new_uuid,
        config: Callable[[], list[Payload]] | None = None,
    ) -> None:
        self._registry = registry
        self._config = config  # the session's configOptions now (see config_options)
        self._new_id = new_id
        self._message: str | None = None  # the agent message being streamed
        self._thought: str | None = None  # the thought being streamed
        self._text_before = False  # the last thing shown in this turn was a model's text
        self._calls: dict[str, _OpenCall] = {}
        self._rejected: list[str] = []  # titles of the calls the user rejected this turn
        self._subagents: dict[str, _Subagent] = {}  # by the id of the agent call running it

    def event(self, event: SessionEvent) -> list[Payload]:
        """The payloads for one session event (none for events a client needs no update for)."""
        match event:
            case AssistantText(text=text) if text:
                if self._message is None:
                    self._message = self._new_id()
                    if self._text_before:  # another model request's text: its own paragraph
                        text = PARAGRAPH_BREAK + text
                self._text_before = False
                return [_chunk("agent_message_chunk", text, self._message)]
            case AssistantThought(text=text) if text:
                if self._thought is None:
                    self._thought = self._new_id()
                return [_chunk("agent_thought_chunk", text, self._thought)]
            case AssistantMessage():
                self._text_before = self._message is not None
                self._end_message()  # the next text is another model response
            case TurnStarted():
                self._end_message()
                self._text_before = False
                self._rejected = []
            case StreamReset():
                return [self._own_message(retry_text(event), _retry_meta(event))]
            case ToolCallStart():
                self._end_message()
                self._text_before = False
                self._calls[event.call_id] = _OpenCall(event.title, acp_kind(str(event.kind)))
                return [_tool_call_start(event)]
            case ToolCallUpdate():
                return [self._tool_call_update(event)]
            case TurnEnded(result=result):
                return self._turn_ended(result)
            case SubagentUpdate():
                return [self._subagent_update(event)]
            case PlanUpdate(todos=todos):
                return [plan_update(todos)]
            case Notice():
                return [self._own_message(notice_text(event), _notice_meta(event))]
            case SessionTitled(title=title):
                return [{"sessionUpdate": "session_info_update", "title": title}]
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
                return [mode_update(mode), *self._config_update()]
            case ModelChanged():
                return self._config_update()
            case CommandsChanged(commands=commands):
                return [commands_update(commands)]
            case UsageUpdate(context_tokens=used, context_window=size) if size > 0:
                return [{"sessionUpdate": "usage_update", "used": max(used, 0), "size": size}]
        return []

    def _tool_call_update(self, event: ToolCallUpdate) -> Payload:
        payload = self._tool_call_payload(event)
        nested = self._subagents.get(event.call_id)
        if nested is not None and event.status in _TERMINAL:
            del self._subagents[event.call_id]  # the agent call is over: its steps, its answer
            payload["content"] = [_text_content(nested.steps_text()), *payload.get("content", [])]
        return payload

    def _tool_call_payload(self, event: ToolCallUpdate) -> Payload:
        call = self._calls.get(event.call_id)
        if event.terminal_id is not None and call is not None:
            call.terminal_id = event.terminal_id
        if event.status not in ("completed", "failed", "cancelled"):
            return _tool_call_progress(event)
        self._calls.pop(event.call_id, None)
        if event.ending == "rejected":
            self._rejected.append(call.title if call is not None else event.call_id)
        return tool_call_end(
            event.call_id,
            ToolEnd(
                status=event.status,
                kind=call.kind if call is not None else "other",
                output=event.output,
                display=event.display,
                diff=event.diff,
                locations=event.locations,
                ending=event.ending,
                terminal_id=call.terminal_id if call is not None else None,
            ),
        )

    def _turn_ended(self, result: TurnResult) -> list[Payload]:
        """End every call the turn left open; say so when a rejection stopped the turn."""
        payloads = [
            tool_call_end(
                call_id,
                ToolEnd("cancelled", call.kind, ending="cancelled", terminal_id=call.terminal_id),
            )
            for call_id, call in self._calls.items()
        ]
        self._calls.clear()
        self._subagents.clear()
        if self._rejected and result.stop_reason != "cancelled":
            titles = "; ".join(self._rejected)
            text = f"Stopped: you rejected {titles}. Say how cairn should go on."
            meta = {"kind": "notice", "level": "info", "source": "permissions"}
            payloads.append(self._own_message(f"{text}\n\n", meta))
        self._rejected = []
        self._text_before = False
        return payloads

    def _subagent_update(self, event: SubagentUpdate) -> Payload:
        nested = self._subagents.get(event.parent_call_id)
        if nested is None:
            mapper = UpdateMapper(self._registry, new_id=self._new_id)
            nested = _Subagent(event.agent_type, mapper, self._new_id)
            self._subagents[event.parent_call_id] = nested
        nested.note(event.event)
        meta = {
            "kind": "subagent",
            "parentToolCallId": event.parent_call_id,
            "agentId": event.agent_id,
            "agentType": event.agent_type,
            "updates": nested.payloads(event.event),
        }
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": event.parent_call_id,
            "content": [_text_content(nested.steps_text())],
            "_meta": {"cairn": meta},
        }

    def replay(self, items: Iterable[ReplayItem]) -> list[Payload]:
        """What the person saw in a recorded session, in order (``session/load``, daemon load)."""
        payloads: list[Payload] = []
        previous: ReplayItem | None = None
        for item in items:
            payloads.extend(self._replay_item(item, previous))
            previous = item
        self._end_message()
        return payloads

    def _replay_item(self, item: ReplayItem, previous: ReplayItem | None) -> list[Payload]:
        self._end_message()
        if item.kind == "user_text":
            return [_chunk("user_message_chunk", item.text, self._new_id())]
        if item.kind == "assistant_text":
            # as live: the text of another model response of the same turn is its own paragraph
            follows_text = previous is not None and previous.kind == "assistant_text"
            text = PARAGRAPH_BREAK + item.text if follows_text else item.text
            return [_chunk("agent_message_chunk", text, self._new_id())]
        if item.kind == "thought":
            return [_chunk("agent_thought_chunk", item.text, self._new_id())]
        if item.kind == "recap":
            return [self._recap(item.text, replayed=True)]
        if item.kind == "command":  # typed, answered without the model: as live
            payloads = [_chunk("user_message_chunk", item.text, self._new_id())]
            name = item.text.removeprefix("/").split(maxsplit=1)[0] if item.text else ""
            for level, text in item.notices:
                notice = Notice(_notice_level(level), text, f"command:{name}")
                payloads.append(self._own_message(notice_text(notice), _notice_meta(notice)))
            return payloads
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
            if name == ASK_USER_TOOL:
                return [start]  # a question left open: the session asks it again after a load
            # never answered (an interrupted turn): ended as the live turn's end ended it
            end = ToolEnd("cancelled", acp_kind(kind), ending="cancelled")
            return [start, tool_call_end(call_id, end)]
        ended = tool_call_end(call_id, _replayed_end(item, acp_kind(kind)))
        if item.subagent is not None:  # as live: the subagent's steps above its answer
            steps = _steps_text(item.subagent.agent_type, item.subagent.steps)
            ended["content"] = [_text_content(steps), *ended.get("content", [])]
        done = [start, ended]
        todos = _replayed_todos(item)
        if todos is not None:  # as live: the plan follows its todo_write
            done.append(plan_update(todos))
        return done

    def _config_update(self) -> list[Payload]:
        return [] if self._config is None else [config_option_update(self._config())]

    def _recap(self, text: str, *, replayed: bool) -> Payload:
        meta = {"kind": "recap", "text": text, "replayed": replayed}
        return self._own_message(f"{RECAP_PREFIX}{text}\n\n", meta)

    def _own_message(self, text: str, meta: Mapping[str, Any]) -> Payload:
        self._end_message()
        self._text_before = False
        payload = _chunk("agent_message_chunk", text, self._new_id())
        payload["_meta"] = {"cairn": dict(meta)}
        return payload

    def _end_message(self) -> None:
        self._message = None
        self._thought = None


def recorded_plan(items: Iterable[ReplayItem]) -> list[TodoItem]:
    """The plan a recorded session ended with: its last successful ``todo_write``."""
    plan: list[TodoItem] = []
    for item in items:
        todos = _replayed_todos(item)
        if todos is not None:
            plan = todos
    return plan


def _replayed_todos(item: ReplayItem) -> list[TodoItem] | None:
    if item.kind != "tool_call" or item.tool_name != TODO_WRITE_TOOL or item.result is None:
        return None
    from cairn.tools.base import ToolError
    from cairn.tools.todo_write import parse_todos

    try:
        return parse_todos(item.args.get("todos"))
    except ToolError:
        return None


def retry_text(event: StreamReset) -> str:
    """A retried model request as its own paragraph (``⚠ The model request failed; ...``)."""
    return f"{_NOTICE_PREFIX['warning']}The model request failed; {event.describe()}\n\n"


def _retry_meta(event: StreamReset) -> dict[str, Any]:
    meta: dict[str, Any] = {"kind": "notice", "level": "warning", "source": "retry"}
    meta.update(delay=event.delay, reason=event.reason)
    if event.attempt:
        meta["attempt"] = event.attempt
    if event.max_attempts:
        meta["maxAttempts"] = event.max_attempts
    return meta


class _Subagent:
    """What a running subagent did so far, for the payloads of its agent call."""

    def __init__(self, agent_type: str, mapper: UpdateMapper, new_id: Callable[[], str]) -> None:
        self.agent_type = agent_type
        self.mapper = mapper
        self.new_id = new_id
        self.steps: dict[str, list[str]] = {}  # call id -> [title, status]

    def note(self, event: SessionEvent) -> None:
        if isinstance(event, ToolCallStart):
            self.steps[event.call_id] = [event.title or event.name, "pending"]
        elif isinstance(event, ToolCallUpdate) and event.call_id in self.steps:
            self.steps[event.call_id][1] = event.status

    def payloads(self, event: SessionEvent) -> list[Payload]:
        """The subagent's event as this mapper's payloads (a whole answer as one chunk)."""
        if isinstance(event, AssistantMessage):
            payloads = self.mapper.event(event)
            if event.text:
                payloads.append(_chunk("agent_message_chunk", event.text, self.new_id()))
            return payloads
        return self.mapper.event(event)

    def steps_text(self) -> str:
        return _steps_text(self.agent_type, [(t, s) for t, s in self.steps.values()])


def _steps_text(agent_type: str, steps: Sequence[tuple[str, str]]) -> str:
    """A subagent's tool calls under its agent call: the newest few, with their status."""
    lines = [f"{_STEP_MARKS.get(status, '…')} {title}" for title, status in steps]
    hidden = len(lines) - MAX_SUBAGENT_STEPS_SHOWN
    if hidden > 0:
        lines = [f"… {hidden} earlier steps", *lines[hidden:]]
    count = len(steps)
    heading = f"{agent_type} subagent: {count} tool call{'' if count == 1 else 's'}"
    return "\n".join([heading, *lines])


def _notice_level(level: str) -> Literal["info", "warning", "error"]:
    return "error" if level == "error" else "warning" if level == "warning" else "info"


def notice_text(notice: Notice) -> str:
    """A notice as its own paragraph of text."""
    return f"{_NOTICE_PREFIX.get(notice.level, '')}{notice.text}\n\n"


def _notice_meta(notice: Notice) -> dict[str, Any]:
    return {"kind": "notice", "level": notice.level, "source": notice.source}


def _memory_meta(action: str, memories: Sequence[MemoryRef], **extra: str) -> dict[str, Any]:
    """``_meta.cairn`` of a memory item: what happened and to which memories (name and file)."""
    listed = [
        {"name": ref.name, "scope": ref.scope, "relativePath": ref.relative_path, "path": ref.path}
        | ({"note": ref.note} if ref.note else {})  # "possibly stale: learned on …"
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
    return clip_text(text, MAX_TOOL_TEXT_CHARS, "\n… ({dropped} more characters not shown)")


def diff_content(diff: FileDiff) -> Payload:
    content: Payload = {"type": "diff", "path": str(diff.path), "newText": diff.new_text}
    if diff.old_text is not None:
        content["oldText"] = diff.old_text
    return content


def _add_locations(payload: Payload, locations: Sequence[Location]) -> Payload:
    """``payload`` with the files a call touches as ``locations`` (none: no key)."""
    if locations:
        payload["locations"] = [_location(at) for at in locations]
    return payload


def _location(at: Location) -> Payload:
    entry: Payload = {"path": str(at.path)}
    if at.line is not None:
        entry["line"] = at.line
    return entry


def _tool_call_start(event: ToolCallStart) -> Payload:
    payload: Payload = {
        "sessionUpdate": "tool_call",
        "toolCallId": event.call_id,
        "title": event.title,
        "kind": acp_kind(str(event.kind)),
        "status": "pending",
        "rawInput": dict(event.args),
    }
    return _add_locations(payload, event.locations)


def _tool_call_progress(event: ToolCallUpdate) -> Payload:
    """A call that runs (or waits): its status, and the client terminal it runs in."""
    payload: Payload = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": event.call_id,
        "status": event.status,
    }
    if event.terminal_id is not None:
        payload["content"] = [{"type": "terminal", "terminalId": event.terminal_id}]
    return _add_locations(payload, event.locations)


@dataclass(frozen=True)
class ToolEnd:
    """How a tool call ended, live or as recorded: what its final update shows."""

    status: str  # completed, failed, cancelled (also rejected, skipped: recorded statuses)
    kind: str  # its ACP kind
    output: str | None = None  # what the model got (the error, when it failed)
    display: str | None = None  # the short summary for people
    diff: FileDiff | None = None
    locations: Sequence[Location] = ()
    ending: ToolEnding | None = None  # why a cancelled call ended
    terminal_id: str | None = None  # the client terminal it ran in


ENDING_TEXT: dict[str, str] = {  # what people read for a call that did not run to its end
    "rejected": "Rejected",
    "skipped": "Skipped: an earlier call of the same step was rejected",
    "cancelled": "Cancelled",
}


def tool_call_end(call_id: str, end: ToolEnd) -> Payload:
    """The final ``tool_call_update`` of a call: the same for a live call and a replayed one.

    ACP has no status for a call that did not run, so a rejected, skipped or cancelled call is
    ``failed`` with text saying which and ``_meta.cairn.outcome`` naming it. A command shows its
    output (or its terminal, when it ran in the client's), an edit its diff, another call its
    summary; ``rawOutput`` holds what the model got.
    """
    ending = end.ending or (end.status if end.status in ENDING_TEXT else None)
    status = "completed" if end.status == "completed" else "failed"
    payload: Payload = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
    payload["status"] = status
    content: list[Payload] = []
    if end.terminal_id is not None:  # the editor keeps showing what the command printed
        content.append({"type": "terminal", "terminalId": end.terminal_id})
    if ending is not None:
        content.append(_text_content(ENDING_TEXT[ending]))
    elif end.diff is not None and status == "completed":
        content.append(diff_content(end.diff))
    elif end.terminal_id is None:
        shown = end.output if status == "failed" or end.kind == "execute" else end.display
        shown = shown or end.output
        if shown:
            content.append(_text_content(clip_tool_text(shown)))
    if content:
        payload["content"] = content
    _add_locations(payload, end.locations)
    if end.output is not None and ending is None:
        key = "output" if status == "completed" else "error"
        payload["rawOutput"] = {key: clip_tool_text(end.output)}
    if ending is not None:
        payload["_meta"] = {"cairn": {"outcome": ending}}
    return payload


def _replayed_end(item: ReplayItem, kind: str) -> ToolEnd:
    failed = item.error is not None
    status = item.status or ("failed" if failed else "completed")
    return ToolEnd(
        status=status,
        kind=kind,
        output=item.error if failed else item.result,
        display=item.display,
        diff=item.diff,
        locations=item.locations,
    )


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
