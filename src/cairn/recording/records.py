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
from collections.abc import Mapping
from typing import Any, Final

from cairn.content import Content, Text

__all__ = [
    "ASSISTANT",
    "AWAY_RECAP_ITEM",
    "CHAT_COMPRESSION",
    "MID_TURN_USER_MESSAGE",
    "REAL_USER",
    "SLASH_COMMAND",
    "SYSTEM",
    "TOOL_RESULT",
    "USER",
    "format_timestamp",
    "is_typed_by_user",
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
MID_TURN_USER_MESSAGE: Final = "mid_turn_user_message"

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
