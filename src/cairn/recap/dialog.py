"""Turning a session's history into the plain dialog a recap is written from."""

from __future__ import annotations

from collections.abc import Sequence

from cairn.agent.prompt import STARTUP_CONTEXT_ACK
from cairn.agent.reminders import is_system_reminder, strip_system_reminder_blocks
from cairn.content import Content, Text

__all__ = ["RECENT_MESSAGE_WINDOW", "filter_to_dialog", "startup_context_length", "take_recent_dialog"]

RECENT_MESSAGE_WINDOW = 30  # dialog messages a recap is written from


def startup_context_length(history: Sequence[Content]) -> int:
    """How many leading entries are structural (the startup context), not real turns."""
    if not history or history[0].role != "user":
        return 0
    first = history[0]
    if first.parts and all(isinstance(p, Text) and is_system_reminder(p.text) for p in first.parts):
        if (
            len(history) > 1
            and history[1].role == "model"
            and history[1].parts
            and isinstance(history[1].parts[0], Text)
            and history[1].parts[0].text == STARTUP_CONTEXT_ACK
        ):
            return 2
        return 1
    return 0


def filter_to_dialog(history: Sequence[Content]) -> list[Content]:
    """Keep only non-blank user/model text (no thoughts, tool calls or tool results), with
    ``<system-reminder>`` blocks removed; entries left empty are dropped."""
    dialog: list[Content] = []
    for entry in history:
        parts: list[Text] = []
        for part in entry.parts:
            if not isinstance(part, Text) or not part.text.strip():
                continue
            text = strip_system_reminder_blocks(part.text)
            if text.strip():
                parts.append(Text(text))
        if parts:
            dialog.append(Content(entry.role, list(parts)))
    return dialog


def take_recent_dialog(dialog: Sequence[Content], window: int = RECENT_MESSAGE_WINDOW) -> list[Content]:
    """The last ``window`` messages, starting at a user message (never on a dangling reply)."""
    if len(dialog) <= window:
        return list(dialog)
    start = len(dialog) - window
    while start < len(dialog) and dialog[start].role != "user":
        start += 1
    return list(dialog[start:])
