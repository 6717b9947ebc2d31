"""The arguments a model passes a tool: checked, with a :class:`ToolError` the model can read
when one is missing or of the wrong kind (integral floats and digit strings count as integers,
as models sometimes send them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.tools.base import ToolError

__all__ = [
    "optional_bool",
    "optional_int",
    "optional_number",
    "optional_str",
    "optional_str_list",
    "require_str",
]


def require_str(args: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"Invalid parameters: `{key}` is required and must be a string.")
    if not allow_empty and not value.strip():
        raise ToolError(f"Invalid parameters: `{key}` must not be empty.")
    return value


def optional_str(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"Invalid parameters: `{key}` must be a string.")
    return value if value.strip() else None


def optional_int(args: Mapping[str, Any], key: str, *, minimum: int = 0) -> int | None:
    """An integer argument; integral floats and digit strings (as models sometimes send) count."""
    value = args.get(key)
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    if number is None or number < minimum:
        raise ToolError(f"Invalid parameters: `{key}` must be an integer >= {minimum}.")
    return number


def optional_number(args: Mapping[str, Any], key: str) -> float | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ToolError(f"Invalid parameters: `{key}` must be a number.")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ToolError(f"Invalid parameters: `{key}` must be a number.")


def optional_bool(args: Mapping[str, Any], key: str, *, default: bool = False) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    raise ToolError(f"Invalid parameters: `{key}` must be true or false.")


def optional_str_list(args: Mapping[str, Any], key: str) -> list[str]:
    value = args.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ToolError(f"Invalid parameters: `{key}` must be a list of strings.")
    return list(value)
