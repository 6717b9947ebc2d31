"""Turning a session's history into the plain dialog a recap is written from."""

from __future__ import annotations

from collections.abc import Sequence

from cairn.agent.prompt import STARTUP_CONTEXT_ACK
from cairn.agent.reminders import is_system_reminder, strip_system_reminder_blocks
from cairn.content import Content, Part, Text

__all__ = [
    "RECENT_MESSAGE_WINDOW",
    "filter_to_dialog",
    "startup_context_length",
    "take_recent_dialog",
]

RECENT_MESSAGE_WINDOW = 30  # dialog messages a recap is written from


def startup_context_length(history: Sequence[Content]) -> int:
    """How many leading entries are structural (the startup context), not real turns.

    A first user entry followed by the model's startup acknowledgement → 2 (cairn's startup
    context, and the reference's legacy one whatever its first entry holds); a first user entry
    made only of ``<system-reminder>`` blocks → 1; otherwise 0.
    """
    if not history or history[0].role != "user":
        return 0
    if len(history) > 1 and _is_startup_ack(history[1]):
        return 2
    first = history[0]
    if first.parts and all(isinstance(p, Text) and is_system_reminder(p.text) for p in first.parts):
        return 1
    return 0


def _is_startup_ack(entry: Content) -> bool:
    return (
        entry.role == "model"
        and bool(entry.parts)
        and isinstance(entry.parts[0], Text)
        and entry.parts[0].text == STARTUP_CONTEXT_ACK
    )


def filter_to_dialog(history: Sequence[Content]) -> list[Content]:
    """Keep only non-blank user/model text (no thoughts, tool calls or tool results), with
    ``<system-reminder>`` blocks removed; entries left empty are dropped."""
    return [kept for entry in history if (kept := _dialog_entry(entry)) is not None]


def _dialog_entry(entry: Content) -> Content | None:
    parts: list[Part] = []
    for part in entry.parts:
        if not isinstance(part, Text) or not part.text.strip():
            continue
        text = strip_system_reminder_blocks(part.text)
        if text.strip():
            parts.append(Text(text))
    return Content(entry.role, parts) if parts else None


def recent_dialog(history: Sequence[Content], window: int = RECENT_MESSAGE_WINDOW) -> list[Content]:
    """``take_recent_dialog(filter_to_dialog(history), window)``, reading the history from its
    end and only as far back as the window needs, so a long session costs no more than a short
    one."""
    tail: list[Content] = []
    more_before = False
    for entry in reversed(history):
        kept = _dialog_entry(entry)
        if kept is None:
            continue
        if len(tail) == window:
            more_before = True
            break
        tail.append(kept)
    tail.reverse()
    if not more_before:
        return tail
    start = 0
    while start < len(tail) and tail[start].role != "user":
        start += 1
    return tail[start:]


def take_recent_dialog(
    dialog: Sequence[Content], window: int = RECENT_MESSAGE_WINDOW
) -> list[Content]:
    """The last ``window`` messages, starting at a user message (never on a dangling reply)."""
    if len(dialog) <= window:
        return list(dialog)
    start = len(dialog) - window
    while start < len(dialog) and dialog[start].role != "user":
        start += 1
    return list(dialog[start:])
