"""YAML front matter of command, skill and agent files: ``---`` lines around ``key: value``.

Files written for Claude Code often carry values YAML itself refuses, most of all a colon in a
description (``description: Review: staged changes``). Front matter made only of ``key: value``
lines is therefore read line by line when YAML refuses it; anything else YAML cannot read is a
:class:`FrontMatterError`, and the file is skipped with one warning naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FrontMatter",
    "FrontMatterError",
    "field_bool",
    "field_list",
    "field_text",
    "split_front_matter",
]

_OPENING = re.compile(r"\A---[ \t]*\n")
_CLOSING = re.compile(r"^---[ \t]*$", re.MULTILINE)
_KEY_LINE = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)[ \t]*:(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_LIST_SEPARATORS = re.compile(r"[,\s]+")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


class FrontMatterError(ValueError):
    """Front matter that cannot be read; the message says why, without the file name."""


@dataclass(frozen=True)
class FrontMatter:
    """The fields of a file's front matter (``{}`` when it has none) and the text after it."""

    fields: Mapping[str, Any]
    body: str
    raw: Mapping[str, str] = field(default_factory=dict)  # each one-line value as written

    def text(self, key: str) -> str | None:
        """A text field; one YAML read as something else (``argument-hint: [message]`` is a
        list to YAML) is taken as written."""
        value = self.fields.get(key)
        if isinstance(value, list | tuple | dict | bool) and self.raw.get(key):
            return self.raw[key]
        return field_text(self.fields, key)


def split_front_matter(text: str) -> FrontMatter:
    """Split ``text`` into its front matter fields and body (CRLF, a BOM and no front matter
    at all are fine). Raises :class:`FrontMatterError` for front matter that is unreadable."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    opening = _OPENING.match(text)
    if opening is None:
        return FrontMatter({}, text)
    closing = _CLOSING.search(text, opening.end())
    if closing is None:
        raise FrontMatterError("the front matter opened with --- is never closed")
    raw = text[opening.end() : closing.start()]
    body = text[closing.end() :].removeprefix("\n")
    return FrontMatter(_parse(raw), body, _key_lines(raw, strict=False) or {})


def _parse(raw: str) -> dict[str, Any]:
    import yaml  # only when a file has front matter

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(raw, Loader=loader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        lines = _key_lines(raw)
        if lines is not None:
            return lines
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FrontMatterError(f"the front matter is not valid YAML ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontMatterError("the front matter must be `key: value` lines")
    return {str(key): value for key, value in data.items()}


def _key_lines(raw: str, *, strict: bool = True) -> dict[str, str] | None:
    """Plain ``key: value`` lines; with ``strict``, ``None`` when any line is something else."""
    fields: dict[str, str] = {}
    for line in raw.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            if strict:
                return None
            continue
        fields.setdefault(match["key"], _unquote(match["value"] or ""))
    return fields


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def field_text(fields: Mapping[str, Any], key: str) -> str | None:
    """A text field (numbers read as written); ``None`` when absent. A list or a mapping is a
    :class:`FrontMatterError`."""
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str | int | float):
        return str(value).strip()
    raise FrontMatterError(f"`{key}` must be text, not {_kind(value)}")


def field_list(fields: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    """A list field written as a YAML list or as one comma- or space-separated text
    (``Read, Grep`` or ``Read Grep``); ``None`` when absent. Parentheses keep their content
    together: ``Bash(git add *) Read`` is two entries."""
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(_split_entries(value))
    if isinstance(value, list | tuple) and all(isinstance(v, str | int | float) for v in value):
        return tuple(str(v).strip() for v in value if str(v).strip())
    raise FrontMatterError(f"`{key}` must be a list of names or one line of them")


def field_bool(fields: Mapping[str, Any], key: str, default: bool) -> bool:
    """A yes/no field (``true``/``false``, ``yes``/``no``, ``on``/``off``, ``1``/``0``)."""
    value = fields.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise FrontMatterError(f"`{key}` must be true or false, not {value!r}")


def _split_entries(text: str) -> list[str]:
    entries: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        if depth == 0 and _LIST_SEPARATORS.fullmatch(char):
            if current:
                entries.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        entries.append("".join(current))
    return [entry.strip() for entry in entries if entry.strip()]


def _kind(value: Any) -> str:
    return "a list" if isinstance(value, list | tuple) else "a mapping"
