"""Input from outside made safe before it reaches a session: JSON a client sent.

Both network front ends (the daemon's request bodies, the ACP agent's messages) pass what they
parsed through :func:`clean_json`: a structure nested deeper than any real request is refused,
and lone surrogates (``"\\ud800"``: valid in JSON text, not in UTF-8) become U+FFFD
(:func:`cairn.content.scrub_surrogates`, which the attachment builder also applies to every
prompt text), so one bad string can never poison a session's history, its recording or an event
stream.
"""

from __future__ import annotations

from typing import Any

from cairn.content import scrub_surrogates

__all__ = ["MAX_JSON_DEPTH", "TooDeep", "clean_json", "json_depth"]

MAX_JSON_DEPTH = 64  # levels of arrays and objects in one message (real ones use under 10)


class TooDeep(ValueError):
    """The structure is nested deeper than :data:`MAX_JSON_DEPTH`."""


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts (0 for a scalar); iterative, any depth."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def clean_json(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``value`` with clean strings (keys too); :class:`TooDeep` past ``max_depth``."""
    if json_depth(value) > max_depth:
        raise TooDeep(f"nested deeper than {max_depth} levels")
    return _clean(value)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return scrub_surrogates(value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {
            scrub_surrogates(k) if isinstance(k, str) else k: _clean(v) for k, v in value.items()
        }
    return value
