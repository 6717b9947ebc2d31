"""The chat-recording record format: names, timestamps and reading lines back.

One JSON object per line (reference D.2)::

    {"uuid", "parentUuid", "sessionId", "timestamp", "type", "subtype"?, "cwd", "version",
     "message"?, "model"?, "usageMetadata"?, "toolCallResult"?, "systemPayload"?}

``type`` is ``user``, ``assistant``, ``tool_result`` or ``system``; ``message`` is a
:class:`~cairn.content.Content` dict exactly as sent to or received from the model.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from cairn.content import Content, Text
from cairn.vocabulary.tool_calls import FileDiff, Location

__all__ = [
    "APPROVAL_MODE",
    "ASSISTANT",
    "AWAY_RECAP_ITEM",
    "CANCELLED_ANSWER",
    "CHAT_COMPRESSION",
    "COMMAND_NOTICE_LEVELS",
    "MID_TURN_USER_MESSAGE",
    "REAL_USER",
    "SLASH_COMMAND",
    "SYSTEM",
    "TASK_CHECKPOINT",
    "TITLE_SUBTYPE",
    "TOOL_RESULT",
    "USER",
    "command_notices",
    "diff_from_record",
    "diff_record",
    "format_timestamp",
    "is_typed_by_user",
    "locations_from_record",
    "locations_record",
    "message_of",
    "mid_turn_content",
    "parse_records",
    "parse_timestamp",
    "payload_of",
    "recap_texts",
    "user_display_text",
]

USER: Final = "user"
ASSISTANT: Final = "assistant"
TOOL_RESULT: Final = "tool_result"
SYSTEM: Final = "system"

CHAT_COMPRESSION: Final = "chat_compression"
SLASH_COMMAND: Final = "slash_command"
COMMAND_NOTICE_LEVELS: Final = ("info", "warning", "error")  # a command's shown answer
MID_TURN_USER_MESSAGE: Final = "mid_turn_user_message"
CANCELLED_ANSWER: Final = "cancelled_answer"  # {"text"}: what a cancelled response had shown
APPROVAL_MODE: Final = "approval_mode"  # {"mode"}: the session's approval mode changed
TITLE_SUBTYPE: Final = "session_title"  # {"title", "source"}: the session's title
TASK_CHECKPOINT: Final = "task_checkpoint"  # where the task stands (cairn.agent.task_checkpoint)

MAX_RECORDED_DIFF_CHARS: Final = 256_000  # a larger diff is not kept (replay shows its summary)
MAX_RECORDED_LOCATIONS: Final = 100  # places of one tool call kept in its toolCallResult
AWAY_RECAP_ITEM: Final = "away_recap"  # output item type of a recap kept by a slash-command result
REAL_USER: Final = "real_user"  # provenance of text a person typed


def format_timestamp(moment: _dt.datetime) -> str:
    """ISO-8601 in UTC with milliseconds and ``Z``, as JavaScript's ``toISOString`` writes."""
    utc = moment.astimezone(_dt.UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: Any) -> _dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)


def parse_records(data: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """Every readable record of a recording, in file order, and a warning per skipped line.

    A line that is not a JSON object with a string ``uuid`` is skipped. An unfinished last line
    (no newline: the writer crashed mid-record) is normal after a crash and reported as such.
    """
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _record(line)
        if record is not None:
            records.append(record)
        elif number == len(lines):
            warnings.append(f"line {number}: unfinished last record (interrupted write) skipped")
        else:
            warnings.append(f"line {number}: not a valid record; skipped")
    return records, warnings


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("uuid"), str):
        return value
    return None


def message_of(record: Mapping[str, Any]) -> Content | None:
    """The record's ``message`` as content, or ``None`` when absent or unreadable."""
    raw = record.get("message")
    if not isinstance(raw, Mapping):
        return None
    try:
        return Content.from_dict(raw)
    except (ValueError, TypeError, AttributeError):
        return None


def payload_of(record: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = record.get("systemPayload")
    return payload if isinstance(payload, Mapping) else {}


def user_display_text(record: Mapping[str, Any]) -> str:
    """What the person typed: ``systemPayload.displayText`` if recorded, else the text parts."""
    display = payload_of(record).get("displayText")
    if isinstance(display, str):
        return display
    message = mid_turn_content(record) if record.get("type") == SYSTEM else message_of(record)
    if message is None:
        return ""
    return "".join(part.text for part in message.parts if isinstance(part, Text))


def mid_turn_content(record: Mapping[str, Any]) -> Content | None:
    """The user parts of a ``mid_turn_user_message`` record.

    The ``message`` if recorded, else the payload's ``parts`` or ``text`` (writers that keep
    only the typed text in the payload).
    """
    message = message_of(record)
    if message is not None:
        return message
    payload = payload_of(record)
    parts = payload.get("parts")
    if isinstance(parts, list):
        return message_of({"message": {"role": "user", "parts": parts}})
    for key in ("text", "displayText"):
        text = payload.get(key)
        if isinstance(text, str) and text:
            return Content.user(text)
    return None


def is_typed_by_user(record: Mapping[str, Any]) -> bool:
    """A user record of text a person typed (not a hook's continuation or a runtime reminder)."""
    provenance = record.get("provenance")
    return record.get("type") == USER and provenance in (None, REAL_USER)


def recap_texts(record: Mapping[str, Any]) -> list[str]:
    """Recaps kept by a slash-command ``result`` record (``outputHistoryItems`` of away_recap)."""
    if record.get("type") != SYSTEM or record.get("subtype") != SLASH_COMMAND:
        return []
    payload = payload_of(record)
    if payload.get("phase") != "result":
        return []
    items = payload.get("outputHistoryItems", payload.get("outputItems"))
    if not isinstance(items, list):
        return []
    return [
        item["text"]
        for item in items
        if isinstance(item, Mapping)
        and item.get("type") == AWAY_RECAP_ITEM
        and isinstance(item.get("text"), str)
    ]


def command_notices(record: Mapping[str, Any]) -> tuple[str, list[tuple[str, str]]] | None:
    """A command typed and answered without the model (a slash-command ``result`` record that
    is no recap): its line and the notices it showed, as ``(level, text)``; else ``None``."""
    if record.get("type") != SYSTEM or record.get("subtype") != SLASH_COMMAND:
        return None
    payload = payload_of(record)
    raw = payload.get("rawCommand")
    items = payload.get("outputHistoryItems", payload.get("outputItems"))
    if payload.get("phase") != "result" or not isinstance(raw, str) or not isinstance(items, list):
        return None
    if any(isinstance(item, Mapping) and item.get("type") == AWAY_RECAP_ITEM for item in items):
        return None
    notices = [
        (item["type"], item["text"])
        for item in items
        if isinstance(item, Mapping)
        and item.get("type") in COMMAND_NOTICE_LEVELS
        and isinstance(item.get("text"), str)
    ]
    return raw, notices


# ----- what a tool call showed (its toolCallResult entry), so a replay shows the same -----


def diff_record(diff: FileDiff) -> dict[str, Any] | None:
    """A call's diff as recorded (``{path, oldText?, newText}``); ``None`` when too large."""
    if len(diff.new_text) + len(diff.old_text or "") > MAX_RECORDED_DIFF_CHARS:
        return None
    entry: dict[str, Any] = {"path": str(diff.path), "newText": diff.new_text}
    if diff.old_text is not None:
        entry["oldText"] = diff.old_text
    return entry


def diff_from_record(raw: Any) -> FileDiff | None:
    if not isinstance(raw, Mapping):
        return None
    path, old, new = raw.get("path"), raw.get("oldText"), raw.get("newText")
    if not isinstance(path, str) or not isinstance(new, str):
        return None
    return FileDiff(Path(path), old if isinstance(old, str) else None, new)


def locations_record(locations: Sequence[Location]) -> list[dict[str, Any]]:
    """At most :data:`MAX_RECORDED_LOCATIONS` places, as ``{path, line?}``."""
    out: list[dict[str, Any]] = []
    for location in locations[:MAX_RECORDED_LOCATIONS]:
        entry: dict[str, Any] = {"path": str(location.path)}
        if location.line is not None:
            entry["line"] = location.line
        out.append(entry)
    return out


def locations_from_record(raw: Any) -> tuple[Location, ...]:
    if not isinstance(raw, list):
        return ()
    found: list[Location] = []
    for entry in raw:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
            continue
        line = entry.get("line")
        valid = isinstance(line, int) and not isinstance(line, bool) and line >= 0
        found.append(Location(Path(entry["path"]), line if valid else None))
    return tuple(found)
