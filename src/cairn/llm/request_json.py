"""A request body as JSON: the bytes httpx's ``json=`` sends, with the tool list encoded once.

The tool declarations are most of a request's body (9 of 10 KB with the built-in tools) and the
same on every request of a session; encoding them again is a quarter of a millisecond a turn on
a slow host. A wire format builds its tool list with a :class:`ToolListEncoder`, which keeps each
declaration's wire entry and its JSON while the declaration comes again (its name, description
and the very same ``parameters`` object), and hands back a :class:`ToolList`: the entries, and
their JSON as built. :func:`request_json` splices that JSON into the body's.

A :class:`ToolList`'s entries are shared between requests: nothing may change them (a wire
format adds a cache mark through the encoder, which copies the entry it marks).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cairn.llm.types import ToolDeclaration

__all__ = ["ToolList", "ToolListEncoder", "request_json"]

KEPT_DECLARATIONS = 256  # entries an encoder keeps (the oldest go first beyond this)

Entry = dict[str, Any]


def _dumps(value: Any) -> bytes:
    """JSON exactly as httpx encodes a ``json=`` body."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class ToolList(list[Entry]):
    """Wire-format tool entries, and ``json``: their encoding as built."""

    __slots__ = ("json",)

    def __init__(self, entries: list[Entry], encoded: bytes) -> None:
        super().__init__(entries)
        self.json = encoded


class ToolListEncoder:
    """A wire format's tool entries (``entry`` makes one), encoded once per declaration."""

    def __init__(self, entry: Callable[[ToolDeclaration], Entry]) -> None:
        self._entry = entry
        # (name, description, id(parameters)) -> (parameters, entry, its JSON); holding the
        # parameters keeps their id from being reused by another object.
        self._kept: dict[tuple[str, str, int], tuple[Mapping[str, Any], Entry, bytes]] = {}

    def __call__(
        self, tools: Sequence[ToolDeclaration], mark_last: Entry | None = None
    ) -> ToolList:
        """The entries of ``tools``; ``mark_last``: fields added to the last one (a cache mark)."""
        entries: list[Entry] = []
        parts: list[bytes] = []
        for tool in tools:
            entry, encoded = self._encoded(tool)
            entries.append(entry)
            parts.append(encoded)
        if mark_last and entries:
            entries[-1] = {**entries[-1], **mark_last}
            parts[-1] = _dumps(entries[-1])
        return ToolList(entries, b"[" + b",".join(parts) + b"]")

    def _encoded(self, tool: ToolDeclaration) -> tuple[Entry, bytes]:
        key = (tool.name, tool.description, id(tool.parameters))
        kept = self._kept.get(key)
        if kept is not None and kept[0] is tool.parameters:
            return kept[1], kept[2]
        entry = self._entry(tool)
        encoded = _dumps(entry)
        if len(self._kept) >= KEPT_DECLARATIONS:
            del self._kept[next(iter(self._kept))]
        self._kept[key] = (tool.parameters, entry, encoded)
        return entry, encoded


def request_json(body: Mapping[str, Any]) -> bytes:
    """``body`` as httpx's ``json=`` would send it, a :class:`ToolList` spliced in as encoded."""
    tools = body.get("tools")
    if type(tools) is not ToolList:
        return _dumps(body)
    keys = list(body)
    at = keys.index("tools")
    head = _dumps({key: body[key] for key in keys[:at]})[:-1]  # '{...' without its '}'
    tail = _dumps({key: body[key] for key in keys[at + 1 :]})[1:]  # '...}' without its '{'
    comma = b"," if at else b""
    return head + comma + b'"tools":' + tools.json + (b"," + tail if tail != b"}" else tail)
