"""What a finished turn tells Extract before any extraction starts: where its user spoke, and
which memory files its own agent wrote (``memory_tool``: such a turn is not extracted).

Read for every turn that ends, ``cairn -p``'s included, which hands its extraction to a worker
right after: so this module imports little, and never the extraction agent
(:mod:`cairn.memory.background.extract`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cairn.agent.reminders import strip_system_reminder_blocks
from cairn.content import Content, FunctionCall, FunctionResponse, Text
from cairn.tools.permissions import canonical_tool_name
from cairn.vocabulary.tool_names import ToolName

__all__ = [
    "is_user_message",
    "last_user_message",
    "strip_injected_context",
    "turn_wrote_memory",
]

_MEMORY_WRITE_TOOLS = frozenset({ToolName.WRITE_FILE, ToolName.EDIT, "replace", "create_file"})
_PATH_ARGUMENTS = ("file_path", "path", "target_file")
_HOOK_CONTEXT = re.compile(
    r"<cairn:user-prompt-submit-context>.*?(?:</cairn:user-prompt-submit-context>|\Z)", re.DOTALL
)


def strip_injected_context(text: str) -> str:
    """``text`` without ``<system-reminder>`` blocks (recalled memory) and hook context."""
    return _HOOK_CONTEXT.sub("", strip_system_reminder_blocks(text))


def is_user_message(entry: Content) -> bool:
    """A user entry with something the user wrote (not only tool results or reminders)."""
    if entry.role != "user" or any(isinstance(p, FunctionResponse) for p in entry.parts):
        return False
    return any(isinstance(p, Text) and strip_injected_context(p.text).strip() for p in entry.parts)


def last_user_message(history: Sequence[Content]) -> int:
    """The index of the last entry the user wrote (-1: none)."""
    for index in range(len(history) - 1, -1, -1):
        if is_user_message(history[index]):
            return index
    return -1


def _target_path(args: Mapping[str, Any], base: Path) -> Path | None:
    for key in _PATH_ARGUMENTS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            path = Path(value).expanduser()
            return Path(os.path.realpath(path if path.is_absolute() else base / path))
    return None


def turn_wrote_memory(
    history: Sequence[Content], roots: Sequence[Path], *, base: Path
) -> list[Path]:
    """Memory files the latest turn's own agent wrote successfully (``memory_tool``).

    The latest turn is everything after the last user message; a write counts when its call
    got a response without an error. Relative paths are taken from ``base``.
    """
    start = last_user_message(history) + 1
    turn = history[start:]
    responses = {p.id: p for entry in turn for p in entry.parts if isinstance(p, FunctionResponse)}
    real_roots: list[str] = []  # resolved at the first write: most turns write no file
    written: list[Path] = []
    for entry in turn:
        for call in (p for p in entry.parts if isinstance(p, FunctionCall)):
            if canonical_tool_name(call.name) not in _MEMORY_WRITE_TOOLS:
                continue
            response = responses.get(call.id)
            if response is None or response.is_error:
                continue
            path = _target_path(call.args, base)
            if path is None:
                continue
            real_roots = real_roots or [os.path.realpath(root) for root in roots]
            if not any(str(path).startswith(r + os.sep) for r in real_roots):
                continue
            if path not in written:
                written.append(path)
    return written
