"""Session events as daemon envelopes.

Model output, tool calls, plans and mode changes become ``session_update`` envelopes whose
``data`` is shaped like ACP's ``session/update`` ``update`` object (``sessionUpdate`` plus its
fields), so a client of either transport reads the same shapes. Events ACP has no update for
(notices, stream resets, turn starts) get their own envelope types; clients ignore types they do
not know.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.recording.replay import ReplayItem
from cairn.tools.base import FileDiff, Location
from cairn.vocabulary.events import (
    AssistantText,
    AssistantThought,
    ModeChanged,
    Notice,
    PlanUpdate,
    SessionEvent,
    StreamReset,
    ToolCallStart,
    ToolCallUpdate,
    TurnStarted,
    UsageUpdate,
    UserText,
)

__all__ = ["SESSION_UPDATE", "diff_content", "replay_updates", "to_wire"]

SESSION_UPDATE = "session_update"
_ACP_TOOL_STATUS = {"cancelled": "failed"}  # ACP has no "cancelled" tool-call status
MAX_TOOL_TEXT_CHARS = 50_000  # tool output shown per call in an update (the model gets it all)

Wire = tuple[str, dict[str, Any]]


def to_wire(event: SessionEvent) -> Wire | None:
    """The envelope type and data for ``event``; ``None`` for events the daemon does not send."""
    match event:
        case AssistantText(text):
            return _chunk("agent_message_chunk", text)
        case AssistantThought(text):
            return _chunk("agent_thought_chunk", text)
        case UserText(text):
            return _chunk("user_message_chunk", text)
        case ToolCallStart():
            return SESSION_UPDATE, _tool_call(event)
        case ToolCallUpdate():
            return SESSION_UPDATE, _tool_call_update(event)
        case PlanUpdate(todos):
            entries = [
                {"content": t.content, "priority": "medium", "status": t.status}
                for t in todos
                if t.status != "cancelled"  # ACP plans have no cancelled entries
            ]
            return SESSION_UPDATE, {"sessionUpdate": "plan", "entries": entries}
        case ModeChanged(mode):
            return SESSION_UPDATE, {"sessionUpdate": "current_mode_update", "currentModeId": mode}
        case UsageUpdate(usage, context_tokens, context_window):
            return SESSION_UPDATE, {
                "sessionUpdate": "usage_update",
                "used": context_tokens,
                "size": context_window,
                "usage": usage.to_dict(),
            }
        case Notice(level, text, source):
            return "notice", {"level": level, "text": text, "source": source}
        case StreamReset(reason, delay):
            return "stream_reset", {"reason": reason, "delay": delay}
        case TurnStarted(prompt_id, fresh):
            return "turn_started", {"turnId": prompt_id, "fresh": fresh}
    return None  # AssistantMessage duplicates the streamed chunks; TurnEnded is the queue's


def replay_updates(items: Iterable[ReplayItem]) -> list[Wire]:
    """A resumed session's conversation as the envelopes a live client would have seen."""
    wires: list[Wire] = []
    for item in items:
        if item.kind == "user_text":
            wires.append(_chunk("user_message_chunk", item.text))
        elif item.kind == "assistant_text":
            wires.append(_chunk("agent_message_chunk", item.text))
        elif item.kind == "thought":
            wires.append(_chunk("agent_thought_chunk", item.text))
        elif item.kind == "recap":
            wires.append(("session_recap", {"recap": item.text, "replayed": True}))
        elif item.kind == "tool_call" and item.tool_call_id is not None:
            wires.extend(_replayed_tool_call(item))
    return wires


def _chunk(kind: str, text: str) -> Wire:
    return SESSION_UPDATE, {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _tool_call(event: ToolCallStart) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": event.call_id,
        "title": event.title,
        "kind": event.kind.value,
        "status": "pending",
        "rawInput": dict(event.args),
        "content": [],
        "locations": _locations(event.locations),
    }


def _tool_call_update(event: ToolCallUpdate) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": event.call_id,
        "status": _ACP_TOOL_STATUS.get(event.status, event.status),
    }
    content: list[dict[str, Any]] = []
    if event.diff is not None:
        content.append(diff_content(event.diff))
    failed = event.status in ("failed", "cancelled")
    text = (event.output if failed else event.display) or event.output
    if text and event.diff is None:
        content.append({"type": "content", "content": {"type": "text", "text": _clip(text)}})
    if content:
        update["content"] = content
    if event.locations:
        update["locations"] = _locations(event.locations)
    return update


def _replayed_tool_call(item: ReplayItem) -> list[Wire]:
    assert item.tool_call_id is not None
    start = {
        "sessionUpdate": "tool_call",
        "toolCallId": item.tool_call_id,
        "title": item.tool_name or "tool",
        "kind": "other",
        "status": "pending",
        "rawInput": dict(item.args),
        "content": [],
        "locations": [],
    }
    wires: list[Wire] = [(SESSION_UPDATE, start)]
    if item.result is not None or item.error is not None:
        text = item.error if item.error is not None else (item.result or "")
        done = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": item.tool_call_id,
            "status": "completed" if item.error is None else "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": _clip(text)}}],
        }
        wires.append((SESSION_UPDATE, done))
    return wires


def _clip(text: str) -> str:
    if len(text) <= MAX_TOOL_TEXT_CHARS:
        return text
    hidden = len(text) - MAX_TOOL_TEXT_CHARS
    return f"{text[:MAX_TOOL_TEXT_CHARS]}\n… ({hidden} more characters not shown)"


def diff_content(diff: FileDiff) -> dict[str, Any]:
    return {
        "type": "diff",
        "path": str(diff.path),
        "oldText": diff.old_text,
        "newText": diff.new_text,
    }


def _locations(locations: Iterable[Location]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for location in locations:
        entry: dict[str, Any] = {"path": str(location.path)}
        if location.line is not None:
            entry["line"] = location.line
        out.append(entry)
    return out
