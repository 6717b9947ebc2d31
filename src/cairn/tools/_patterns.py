"""Glob patterns as regular expressions, in the two dialects the file tools read: the ``glob``
tool's (also permission rules' and ``grep_search``'s ``glob``) and git's ignore files'."""

from __future__ import annotations

import re

__all__ = ["translate"]

_POSIX_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v",
    "xdigit": "0-9A-Fa-f",
}


def translate(pattern: str, *, git: bool) -> str:
    """The regex of one brace-free ``pattern``, for ``fullmatch`` against a POSIX path.

    ``*`` and ``?`` stay inside one path segment; a whole-segment ``**/`` is zero or more
    folders and a trailing ``**`` all below. With ``git`` the rules are git's: ``\\`` escapes
    the next character, ``a/**`` needs something inside ``a``, and a ``[...]`` class knows
    ``[:alpha:]`` and the like and ``\\`` escapes. In both, a class never matches a ``/``.
    """
    out: list[str] = []
    index, length = 0, len(pattern)
    while index < length:
        char = pattern[index]
        if git and char == "\\" and index + 1 < length:
            out.append(re.escape(pattern[index + 1]))
            index += 2
        elif char == "*":
            end = index
            while end < length and pattern[end] == "*":
                end += 1
            starts_segment = index == 0 or pattern[index - 1] == "/"
            ends_segment = end == length or pattern[end] == "/"
            if end - index >= 2 and starts_segment and ends_segment:
                if end == length:
                    out.append(".+" if git and index > 0 else ".*")
                else:
                    out.append("(?:[^/]*/)*")  # "**/": zero or more folders, "/" included
                    end += 1
            else:
                out.append("[^/]*")
            index = end
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[":
            translated, index = (_git_class if git else _glob_class)(pattern, index)
            out.append(translated)
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


def _glob_class(pattern: str, start: int) -> tuple[str, int]:
    """``[...]`` at ``start`` as a regex class that never matches ``/``; a ``[`` without its
    ``]`` is a literal and a reversed range (``z-a``) matches nothing, as in node's glob."""
    index = start + 1
    negate = index < len(pattern) and pattern[index] in "!^"
    if negate:
        index += 1
    body_start = index
    if index < len(pattern) and pattern[index] == "]":
        index += 1  # a leading "]" is part of the class
    end = pattern.find("]", index)
    if end == -1:
        return re.escape("["), start + 1
    body, items, at = pattern[body_start:end], [], 0
    while at < len(body):
        if at + 2 < len(body) and body[at + 1] == "-":
            low, high = body[at], body[at + 2]
            if low <= high:
                items.append(f"{re.escape(low)}-{re.escape(high)}")
            at += 3
        else:
            items.append(re.escape(body[at]))
            at += 1
    return f"(?![/]){_class(items, negate)}", end + 1


def _git_class(pattern: str, start: int) -> tuple[str, int]:
    """``[...]`` at ``start``; a ``[`` without its ``]`` is a literal, a reversed range (``z-a``)
    matches its first character and a ``-`` right after a range is itself, as in git."""
    index = start + 1
    negate = index < len(pattern) and pattern[index] in "!^"
    if negate:
        index += 1
    items: list[str] = []
    low: str | None = None  # the character a following "-" makes a range from
    first = True
    while index < len(pattern):
        char = pattern[index]
        if char == "]" and not first:
            return f"(?![/]){_class(items, negate)}", index + 1
        first = False
        if char == "[" and pattern.startswith("[:", index):
            end = pattern.find(":]", index + 2)
            name = pattern[index + 2 : end] if end != -1 else ""
            if name in _POSIX_CLASSES:
                items.append(_POSIX_CLASSES[name])
                low, index = None, end + 2
                continue
        ranged = index + 1 < len(pattern) and pattern[index + 1] != "]"
        if char == "-" and low is not None and ranged:
            high, index = _class_character(pattern, index + 1)
            if low <= high:
                items[-1] = f"{re.escape(low)}-{re.escape(high)}"
            low = None
            continue
        low, index = _class_character(pattern, index)
        items.append(re.escape(low))
    return re.escape("["), start + 1


def _class_character(pattern: str, index: int) -> tuple[str, int]:
    """The character at ``index`` of a git class (``\\`` escapes the next) and the index after."""
    if pattern[index] == "\\" and index + 1 < len(pattern):
        return pattern[index + 1], index + 2
    return pattern[index], index + 1


def _class(items: list[str], negate: bool) -> str:
    if not items:  # every range in it was reversed
        return "(?s:.)" if negate else "(?!)"
    return f"[{'^' if negate else ''}{''.join(items)}]"
