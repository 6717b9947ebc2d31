"""System reminders: text cairn adds to a request, wrapped so the model and filters can tell.

A reminder is a text part ``<system-reminder>\\n...\\n</system-reminder>``. The recap and Extract
strip these blocks before they read a conversation, so injected text (recalled memory, plan-mode
notes) is never mistaken for something the user said.
"""

from __future__ import annotations

from cairn.content import Text

__all__ = [
    "SYSTEM_REMINDER_CLOSE",
    "SYSTEM_REMINDER_OPEN",
    "is_system_reminder",
    "plan_mode_reminder",
    "steered_text",
    "steering_text",
    "strip_system_reminder_blocks",
    "system_reminder",
]

SYSTEM_REMINDER_OPEN = "<system-reminder>"
SYSTEM_REMINDER_CLOSE = "</system-reminder>"


def system_reminder(text: str) -> Text:
    return Text(f"{SYSTEM_REMINDER_OPEN}\n{text.strip()}\n{SYSTEM_REMINDER_CLOSE}")


def is_system_reminder(text: str) -> bool:
    """True when the whole text is one reminder block."""
    stripped = text.strip()
    return stripped.startswith(SYSTEM_REMINDER_OPEN) and stripped.endswith(SYSTEM_REMINDER_CLOSE)


def strip_system_reminder_blocks(text: str) -> str:
    """Remove every ``<system-reminder>`` block; an unclosed block drops everything after it.

    Nothing is inserted where a block was removed and nothing is trimmed:
    ``a<system-reminder>x</system-reminder>b`` gives ``ab``.
    """
    out: list[str] = []
    position = 0
    while True:
        start = text.find(SYSTEM_REMINDER_OPEN, position)
        if start < 0:
            out.append(text[position:])
            break
        out.append(text[position:start])
        end = text.find(SYSTEM_REMINDER_CLOSE, start + len(SYSTEM_REMINDER_OPEN))
        if end < 0:
            break
        position = end + len(SYSTEM_REMINDER_CLOSE)
    return "".join(out)


def plan_mode_reminder() -> Text:
    return system_reminder(
        "Plan mode is active. Do not edit files or run commands that change anything. Read and "
        "search what you need, then present a concise plan and wait for the user to approve it."
    )


_STEERING_NOTE = (
    "[The user sent this while you were working. Take it into account and continue; it is "
    "guidance for the current task, not a new request.]\n"
)


def steering_text(text: str) -> Text:
    """A message the user typed while a turn was running, delivered with the next tool results."""
    return Text(f"{_STEERING_NOTE}{text}")


def steered_text(text: str) -> str | None:
    """What the user typed, if ``text`` is a :func:`steering_text`; else ``None``."""
    return text.removeprefix(_STEERING_NOTE) if text.startswith(_STEERING_NOTE) else None
