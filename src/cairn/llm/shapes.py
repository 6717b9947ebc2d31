"""Checking the shape of what an endpoint sent, field by field, as it is read.

A response of the wrong shape (a string where an object belongs, a count that is ``NaN``) is
the endpoint's fault, not cairn's: every reader raises :class:`InvalidStreamError` (kind
``malformed``) naming the field, which is retried as a broken stream and then reported, never a
``TypeError`` out of a parser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cairn.llm.errors import InvalidStreamError

__all__ = ["load_json_object", "malformed", "optional", "text_field", "token_count"]


class _NonFinite(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NonFinite(name)


def load_json_object(data: str) -> dict[str, Any]:
    """A payload as a JSON object; NaN and Infinity (not JSON) are refused."""
    try:
        chunk = json.loads(data, parse_constant=_reject_constant)
    except _NonFinite as exc:
        raise InvalidStreamError(
            f"malformed chunk from the model: {exc} is not a JSON number", kind="malformed"
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise InvalidStreamError(f"invalid JSON in stream: {data[:80]}", kind="dropped") from exc
    if not isinstance(chunk, dict):
        raise malformed("the chunk", chunk, "a JSON object")
    return chunk


def malformed(where: str, value: Any, expected: str) -> InvalidStreamError:
    got = "null" if value is None else type(value).__name__
    got = {"str": "a string", "int": "a number", "float": "a number", "list": "a list"}.get(
        got, got
    )
    return InvalidStreamError(
        f"malformed chunk from the model: {where} is {got}, not {expected}", kind="malformed"
    )


_EXPECTED: dict[Any, str] = {Mapping: "an object", list: "a list", str: "a string"}


def optional(container: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    """``container[key]`` when present and of ``kind``; ``None`` when absent or null."""
    value = container.get(key)
    if value is None or isinstance(value, kind):
        return value
    raise malformed(where, value, _EXPECTED.get(kind, "the expected type"))


def text_field(container: Mapping[str, Any], key: str, where: str) -> str:
    """A text field: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    value = container.get(key)
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list) and all(isinstance(p, Mapping) for p in value):
        texts = [p.get("text") for p in value]
        if all(t is None or isinstance(t, str) for t in texts):
            return "".join(t for t in texts if t)
    raise malformed(where, value, "a string")


def token_count(container: Mapping[str, Any], key: str, where: str) -> int:
    """A token count: a finite non-negative number, or absent."""
    value = container.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 2**63:
        raise malformed(f"{where}.{key}", value, "a token count")
    return int(value)
