"""Settings files of every key and every shape of value, for :mod:`tests.config.test_schema`.

Generated from the schema, so a key added to it is covered; each case is one settings file's
object. ``tests/config/data/settings_cases.json`` holds what the pydantic models cairn used
until issue 32 made of each (the error message, or the value read and the warnings): the
settings now read without pydantic must say exactly the same.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from typing import Any

SHAPES: list[Any] = [
    *(True, False, 0, 1, -1, 2.5, 1e30, "x", "", None),
    *([], ["a"], [1], {}, {"k": "v"}, {"k": 1}),
]

HOOK_ENTRIES: list[Any] = [
    {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]},
    {"hooks": [{"command": "echo", "timeout": 5, "async": True, "if": "Bash(git *)"}]},
    {"hooks": [{"type": "prompt", "prompt": "ok?", "model": "m"}]},
    {"hooks": [{"type": "command"}]},
    {"hooks": [{"type": "prompt", "prompt": "  "}]},
    {"hooks": [{"type": "other", "command": "x"}]},
    {"hooks": [{"command": 3}]},
    {"hooks": "echo"},
    {"matcher": 1, "hooks": []},
    {"toolNames": "cairn", "hooks": []},
    {"toolNames": "qwen", "hooks": []},
    {"tool_names": "cairn", "hooks": [{"command": "x", "run_async": True, "statusMessage": "s"}]},
    {"hooks": [{"command": "x", "env": {"A": "b"}}]},
    {"hooks": [{"command": "x", "env": {"A": 1}}]},
    "not an object",
]
SERVER_ENTRIES: list[Any] = [
    {"command": "srv", "args": ["a"], "env": {"K": "v"}, "cwd": "/x"},
    {"type": "stdio"},
    {"type": "http", "url": "http://127.0.0.1:1/mcp"},
    {"type": "sse"},
    {"httpUrl": "http://127.0.0.1:1/mcp", "headers": {"A": "b"}, "timeout": 5},
    {"url": "http://127.0.0.1:1/sse", "trust": True, "includeTools": ["a"], "excludeTools": []},
    {"command": "srv", "include_tools": ["a"], "disabled": True, "description": "d"},
    {},
    {"command": 1},
    {"command": "srv", "args": "a"},
    {"command": "srv", "type": "tcp"},
    {"command": "srv", "timeout": "soon"},
    "srv",
]
MODEL_ENTRIES: list[Any] = [
    "gpt-x",
    {"id": "m1", "name": "M1", "authType": "openai", "baseUrl": "http://127.0.0.1:1/v1"},
    {"id": "m2", "envKey": "KEY", "description": "d", "auth_type": "anthropic"},
    {"id": " "},
    {"name": "no id"},
    {"id": "m3", "authType": "gemini"},
    {"id": 3},
    5,
    None,
]


def _leaves(model: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, info in model.model_fields.items():
        here = (*path, info.alias or name)
        annotation = info.annotation
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            yield here, annotation
            yield from _leaves(annotation, here)
        else:
            yield here, annotation


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    for key in reversed(path):
        value = {key: value}
    return value  # type: ignore[return-value]


def _literals(annotation: Any) -> list[Any]:
    found = []
    if typing.get_origin(annotation) is typing.Literal:
        found += list(typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        found += _literals(arg)
    return found


def cases(settings_class: Any) -> list[dict[str, Any]]:
    """Every case's settings object, in a fixed order."""
    out: list[dict[str, Any]] = []
    for path, annotation in _leaves(settings_class):
        values = [*SHAPES, *_literals(annotation)]
        if path[0] == "hooks" and len(path) == 2:
            values += [[entry] for entry in HOOK_ENTRIES]
        if path == ("mcpServers",):
            values += [{"one": entry} for entry in SERVER_ENTRIES]
        if path == ("model", "available"):
            values += [[entry] for entry in MODEL_ENTRIES] + ["auto", "all"]
        for value in values:
            out.append(_nest(path, value))
        snake = "".join("_" + c.lower() if c.isupper() else c for c in path[-1])
        if snake != path[-1]:  # the field's Python name: an unknown key, said so
            out.append(_nest((*path[:-1], snake), values[0]))
    out += [
        {"unknownKey": 1, "tools": {"approval_mode": "yolo", "nope": True}},
        {"tools": {"sandbox": True}},
        {"tools": {"sandbox": False, "approvalMode": "plan"}},
        {"tools": {"sandbox": "on"}},
        {"tools": {"sandbox": {"enabled": True, "network": "loopback", "writablePaths": ["/w"]}}},
        {"model": {"name": 1, "maxSessionTurns": "x"}, "memory": {"backend": "sql"}},
        {"model": {"generationConfig": {"maxOutputTokens": {"main": 0, "recall-selector": 5}}}},
        {"model": {"generationConfig": {"samplingParams": {"top_p": 0.5, "max_tokens": 9}}}},
        {"model": {"generationConfig": {"samplingParams": {"topP": 0.5}}}},
        {"notifications": {"idleSeconds": -1}, "agents": {"maxConcurrent": 0, "maxTurns": 0}},
        {"tools": {"webSearch": {"maxResults": 21}}},
        {"tools": {"webSearch": {"maxResults": 0, "provider": "bing"}}},
        {"context": {"fileName": ["A.md", 3]}},
        {"context": {"fileName": 3}},
        {"general": {"checkpointing": {"maxFileSizeMb": 1, "enabled": "yes"}}},
        {"env": {"A": "b", "C": 1}},
        {"permissions": {"allow": ["Bash(ls)", 2], "deny": "Write"}},
        {"mcpServers": {"a": {"command": "x"}, "b": {"type": "stdio"}}, "mcp": {"allowed": ["a"]}},
        {"hooks": {"PreToolUse": [{"hooks": [{"command": ""}]}], "Stop": "x"}},
    ]
    return out


def canonical(value: Any) -> Any:
    """``value`` as JSON would write it (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(value, default=repr))


def outcome(settings_as_read: Any, raw: dict[str, Any]) -> dict[str, Any]:
    """What reading ``raw`` as a settings file gives: its error, or the value of each key it
    names (as the file spells it), the keys set and the warnings."""
    warnings: list[str] = []
    try:
        settings = settings_as_read(raw, "settings.json", json.dumps(raw, indent=2), warnings)
    except Exception as exc:  # SettingsError: its message is the outcome
        return {"error": str(exc)}
    dump: Any = settings.model_dump(by_alias=True)
    path = []
    while isinstance(raw, dict) and len(raw) == 1 and isinstance(dump, dict):
        (key, inner), = raw.items()
        if not isinstance(inner, dict) or key not in dump:
            break
        path.append(key)
        raw, dump = inner, dump[key]  # down a single-key chain: the case's one setting
    values = {k: dump.get(k, "<absent>") for k in raw} if isinstance(dump, dict) else dump
    fields_set = sorted(settings.model_fields_set)
    return canonical({"at": path, "values": values, "set": fields_set, "warnings": warnings})
