"""What a front end shows when a recorded session is loaded (ACP ``session/load``, ``/resume``).

Replay follows the whole active chain, compressed part included: the person sees the
conversation they had, while the model gets the compressed history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any, Literal, TypeAlias

from cairn.content import FunctionCall, FunctionResponse, Part, Text, Thought
from cairn.recording.records import (
    ASSISTANT,
    CANCELLED_ANSWER,
    MID_TURN_USER_MESSAGE,
    SYSTEM,
    TOOL_RESULT,
    command_notices,
    diff_from_record,
    is_typed_by_user,
    locations_from_record,
    message_of,
    payload_of,
    recap_texts,
    user_display_text,
)
from cairn.values import Value
from cairn.vocabulary.tool_calls import FileDiff, Location, SubagentReport

__all__ = ["ReplayItem", "ReplayKind", "replay_items"]

ReplayKind: TypeAlias = Literal[
    "user_text", "assistant_text", "thought", "tool_call", "recap", "command"
]


class ReplayItem(Value, frozen=False):
    """One thing to show. ``tool_call`` items carry the call and, once recorded, its result;
    ``command`` items a command line answered without the model (``text``) and its notices."""

    kind: ReplayKind
    text: str = ""
    tool_call_id: str | None = None
    tool_name: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    result: str | None = None
    display: str | None = None  # the short summary people saw live ("Found 3 files")
    error: str | None = None
    status: str | None = None  # as recorded: completed, failed, rejected, skipped, cancelled
    diff: FileDiff | None = None  # the change an edit showed live
    locations: tuple[Location, ...] = ()  # the places the call reported (search results)
    subagent: SubagentReport | None = None  # an agent call's subagent at work
    notices: list[tuple[str, str]] = field(default_factory=list)  # a command's (level, text)
    uuid: str | None = None
    timestamp: str | None = None


def replay_items(chain: Iterable[Mapping[str, Any]]) -> list[ReplayItem]:
    builder = _ReplayBuilder()
    for record in chain:
        builder.add(record)
    return builder.items


class _ReplayBuilder:
    def __init__(self) -> None:
        self.items: list[ReplayItem] = []
        self._open_calls: dict[str, ReplayItem] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if is_typed_by_user(record) or record.get("subtype") == MID_TURN_USER_MESSAGE:
            self._text("user_text", user_display_text(record), record)
        elif kind == ASSISTANT:
            self._assistant(record)
        elif kind == TOOL_RESULT:
            self._tool_results(record)
        elif kind == SYSTEM:
            for text in recap_texts(record):
                self._text("recap", text, record)
            command = command_notices(record)
            if command is not None:
                self._new("command", record, text=command[0], notices=command[1])
            if record.get("subtype") == CANCELLED_ANSWER:  # shown live before the cancel
                shown = payload_of(record).get("text")
                if isinstance(shown, str) and shown:
                    self._text("assistant_text", shown, record)

    def _assistant(self, record: Mapping[str, Any]) -> None:
        message = message_of(record)
        if message is None:
            return
        for part in message.parts:
            self._assistant_part(part, record)

    def _assistant_part(self, part: Part, record: Mapping[str, Any]) -> None:
        match part:
            case Text(text):
                self._text("assistant_text", text, record, merge=True)
            case Thought(text):
                self._text("thought", text, record, merge=True)
            case FunctionCall(id=call_id, name=name, args=args):
                item = self._new("tool_call", record, tool_call_id=call_id, tool_name=name)
                item.args = dict(args)
                self._open_calls[call_id] = item

    def _tool_results(self, record: Mapping[str, Any]) -> None:
        message = message_of(record)
        if message is None:
            return
        shown = _result_entries(record)
        for part in message.parts:
            if isinstance(part, FunctionResponse):
                self._attach(part, record, shown.get(part.id, {}))

    def _attach(
        self, response: FunctionResponse, record: Mapping[str, Any], shown: Mapping[str, Any]
    ) -> None:
        item = self._open_calls.pop(response.id, None)
        if item is None:  # a result whose call is not on the chain: still show it
            item = self._new("tool_call", record, tool_call_id=response.id, tool_name=response.name)
        if response.is_error:
            item.error = response.text
        else:
            item.result = response.text
            display = shown.get("resultDisplay")
            item.display = display if isinstance(display, str) else None
        status = shown.get("status")
        item.status = status if isinstance(status, str) else None
        item.diff = diff_from_record(shown.get("diff"))
        item.locations = locations_from_record(shown.get("locations"))
        item.subagent = SubagentReport.from_record(shown.get("subagent"))

    def _text(
        self, kind: ReplayKind, text: str, record: Mapping[str, Any], *, merge: bool = False
    ) -> None:
        if not text:
            return
        last = self.items[-1] if self.items else None
        if merge and last is not None and last.kind == kind and last.uuid == record.get("uuid"):
            last.text += text
            return
        self._new(kind, record).text = text

    def _new(self, kind: ReplayKind, record: Mapping[str, Any], **fields: Any) -> ReplayItem:
        item = ReplayItem(
            kind, uuid=record.get("uuid"), timestamp=record.get("timestamp"), **fields
        )
        self.items.append(item)
        return item


def _result_entries(record: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``toolCallResult`` entries by call id (a malformed entry is skipped)."""
    results = record.get("toolCallResult")
    if not isinstance(results, list):
        return {}
    return {
        entry["callId"]: entry
        for entry in results
        if isinstance(entry, Mapping) and isinstance(entry.get("callId"), str)
    }
