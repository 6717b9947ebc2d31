"""Load, merge and validate settings files.

Precedence, lowest to highest: built-in defaults, ``$CAIRN_HOME/settings.json``, the project's
``.cairn/settings.json``, environment variables, command-line flags (the last two are applied by
:func:`resolve_endpoint` and the CLI). String values may reference environment variables as
``$VAR`` or ``${VAR}``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cairn.config.endpoint import Endpoint, NoAuthError, resolve_endpoint
from cairn.config.paths import find_git_root, user_settings_path
from cairn.config.settings import Settings

__all__ = [
    "Endpoint",
    "LoadedSettings",
    "NoAuthError",
    "SettingsError",
    "describe_validation_error",
    "load_settings",
    "merge_settings_dicts",
    "project_settings_path",
    "read_settings_file",
    "resolve_endpoint",
]

# Keys whose lists are unioned across files rather than replaced.
_UNION_KEYS = {("permissions", "allow"), ("permissions", "ask"), ("permissions", "deny")}
# Keys whose lists are concatenated (user hooks run, then project hooks).
_CONCAT_PARENTS = {("hooks",)}
# Keys whose entries replace each other whole: a project's server named like a user's wins.
_REPLACE_CHILDREN = {("mcpServers",)}
_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class SettingsError(Exception):
    """A settings file cannot be used; the message names the file, the key and the fix."""


@dataclass
class LoadedSettings:
    settings: Settings
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def project_settings_path(cwd: Path) -> Path:
    root = find_git_root(cwd) or cwd.resolve()
    return root / ".cairn" / "settings.json"


def load_settings(cwd: Path, *, user_path: Path | None = None) -> LoadedSettings:
    """Read the user and project settings files, merge them and validate the result."""
    paths = [user_path or user_settings_path(), project_settings_path(cwd)]
    merged: dict[str, Any] = {}
    warnings: list[str] = []
    used: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        resolved = path.resolve()
        if resolved in seen or not path.is_file():
            continue
        seen.add(resolved)
        raw = read_settings_file(path)
        _validate_file(path, raw, warnings)
        merged = merge_settings_dicts(merged, raw)
        used.append(path)
    merged = _interpolate(merged)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:  # pragma: no cover - each file was validated on its own
        raise SettingsError(describe_validation_error(exc, "merged settings", "")) from None
    return LoadedSettings(settings, warnings, used)


def merge_settings_dicts(
    base: Mapping[str, Any], override: Mapping[str, Any], _path: tuple[str, ...] = ()
) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        path = (*_path, key)
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, dict) and _path not in _REPLACE_CHILDREN:
            out[key] = merge_settings_dicts(current, value, path)
        elif isinstance(current, list) and isinstance(value, list) and path in _UNION_KEYS:
            out[key] = current + [v for v in value if v not in current]
        elif isinstance(current, list) and isinstance(value, list) and _path in _CONCAT_PARENTS:
            out[key] = current + value
        else:
            out[key] = value
    return out


def read_settings_file(path: Path) -> dict[str, Any]:
    """One settings file as a dict; :class:`SettingsError` names the file (and line) if unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read settings ({exc.strerror})") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path} line {exc.lineno} column {exc.colno}: invalid JSON ({exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: settings must be a JSON object, not {type(data).__name__}")
    return data


def _validate_file(path: Path, raw: dict[str, Any], warnings: list[str]) -> None:
    try:
        settings = Settings.model_validate(_interpolate(raw))
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc, str(path), _text(path))) from None
    for key in _unknown_keys(settings, ""):
        warnings.append(f"{path}: unknown setting `{key}` is ignored")


def _unknown_keys(model: BaseModel, prefix: str) -> list[str]:
    found = [f"{prefix}{k}" for k in (model.model_extra or {})]
    for attr, info in type(model).model_fields.items():
        value = getattr(model, attr)
        alias = info.alias or attr
        if isinstance(value, BaseModel):
            found += _unknown_keys(value, f"{prefix}{alias}.")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    found += _unknown_keys(item, f"{prefix}{alias}[{i}].")
    return found


_EXPECTED = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "literal_error": None,
    "missing": "present",
}


def describe_validation_error(
    exc: ValidationError, where: str, text: str, prefix: str = ""
) -> str:
    """One line per error: the file (and line), the dotted key under ``prefix``, what it must be."""
    lines = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"] if not str(p).startswith(("function-", "literal"))]
        key = ".".join([prefix, *loc] if prefix else loc) or "(top level)"
        expected = _EXPECTED.get(error["type"])
        if expected is None:
            expected = error["msg"].removeprefix("Input should be ").rstrip(".")
        last = loc[-1] if loc else prefix.rpartition(".")[2]
        line_no = _line_of(text, last) if last and text else None
        at = f"{where} line {line_no}" if line_no else where
        got = json.dumps(error.get("input"), default=str)[:60]
        lines.append(f"{at}: `{key}` must be {expected} (got {got})")
    return "\n".join(lines)


def _line_of(text: str, key: str) -> int | None:
    needle = f'"{key}"'
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return None


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _interpolate(value: Any) -> Any:
    if isinstance(value, str):
        return _ENV_REF.sub(lambda m: os.environ.get(m.group(1) or m.group(2), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v) for v in value]
    return value
