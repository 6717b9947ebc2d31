"""The JSON schemas of tool parameters, built the same way for every tool."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["object_schema", "string_property"]


def object_schema(
    properties: Mapping[str, Mapping[str, Any]], required: Sequence[str] = ()
) -> dict[str, Any]:
    """The JSON schema of an object (a tool's parameters): its ``properties``, those
    ``required``."""
    return {"type": "object", "properties": dict(properties), "required": list(required)}


def string_property(description: str) -> dict[str, str]:
    """The JSON schema of a string parameter the model is told about in ``description``."""
    return {"type": "string", "description": description}
