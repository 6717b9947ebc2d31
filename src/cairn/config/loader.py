"""Load, merge and validate settings files.

Precedence, lowest to highest: built-in defaults, ``$CAIRN_HOME/settings.json``, the project's
``.cairn/settings.json``, environment variables, command-line flags (the last two are applied by
:func:`resolve_endpoint` and the CLI). String values may reference environment variables as
``$VAR`` or ``${VAR}``. The hooks of Claude Code's settings files follow cairn's own
(:mod:`cairn.config.claude_hooks`), as those files write them (no ``$VAR`` is replaced).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.config.endpoint import Endpoint, NoAuthError, resolve_endpoint
from cairn.config.paths import find_git_root, user_settings_path
from cairn.config.sections import ErrorDetails, Section, ValidationError
from cairn.config.settings import HookMatcher, HooksSettings, Settings
from cairn.fsutil import FileTooLarge, NotRegularFile, read_regular_file
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.config.trust import ProjectTrust

__all__ = [
    "Endpoint",
    "LoadedSettings",
    "NoAuthError",
    "SettingsError",
    "ValidationError",
    "describe_validation_error",
    "load_settings",
    "merge_settings_dicts",
    "project_settings_path",
    "read_settings_file",
    "referenced_variables",
    "resolve_endpoint",
    "settings_as_read",
    "validate_settings",
]

MAX_SETTINGS_BYTES = 4 << 20  # a larger settings file is refused, not read
MAX_SETTINGS_DEPTH = 64  # objects and lists nested deeper are refused (no recursion limit hit)
MAX_NUMBER_DIGITS = 100  # longer numbers are refused (Python's int() stops at 4300 digits)
# Keys whose lists are unioned across files rather than replaced.
_UNION_KEYS = {("permissions", "allow"), ("permissions", "ask"), ("permissions", "deny")}
# Keys whose lists are concatenated (user hooks run, then project hooks).
_CONCAT_PARENTS = {("hooks",)}
# Keys whose entries replace each other whole: a project's server named like a user's wins.
_REPLACE_CHILDREN = {("mcpServers",)}
_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class SettingsError(Exception):
    """A settings file cannot be used; the message names the file, the key and the fix."""


class LoadedSettings(Value, frozen=False):
    """What :func:`load_settings` read: the settings, its warnings, the files used."""

    settings: Settings
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    trust: ProjectTrust | None = None  # the project file's trust (None: there is no such file)


def project_settings_path(cwd: Path) -> Path:
    root = find_git_root(cwd) or cwd.resolve()
    return root / ".cairn" / "settings.json"


def load_settings(cwd: Path, *, user_path: Path | None = None) -> LoadedSettings:
    """Read the user and project settings files, merge them and validate the result.

    The project file's hooks, MCP servers and permission-widening keys are used only when its
    folder is trusted (:mod:`cairn.config.trust`); otherwise they are dropped with one warning.
    """
    paths = [user_path or user_settings_path(), project_settings_path(cwd)]
    merged: dict[str, Any] = {}
    warnings: list[str] = []
    used: list[Path] = []
    seen: set[Path] = set()
    user_raw: dict[str, Any] = {}
    trust: ProjectTrust | None = None
    for index, path in enumerate(paths):
        resolved = path.resolve()
        if resolved in seen or not os.path.lexists(path):
            continue  # a missing file is no settings; anything else there is read or reported
        seen.add(resolved)
        raw = read_settings_file(path)
        validated = _validate_file(path, raw, warnings)
        if index == 0:
            user_raw = raw
        else:
            raw, trust = _gate_project_file(cwd, raw, validated, user_raw, warnings)
        merged = merge_settings_dicts(merged, raw)
        used.append(path)
    # Each file was validated on its own, so the merge of valid files is valid.
    settings = settings_as_read(merged, "merged settings")
    trust = _add_claude_hooks(cwd, settings, user_raw, trust, warnings, used)
    return LoadedSettings(settings, warnings, used, trust)


def _add_claude_hooks(
    cwd: Path,
    settings: Settings,
    user_raw: dict[str, Any],
    trust: ProjectTrust | None,
    warnings: list[str],
    used: list[Path],
) -> ProjectTrust | None:
    """Claude Code's hooks after cairn's (``claudeHooks``): the user's file when asked for,
    the project's files when the folder is trusted (the trust computed here when no
    ``.cairn/settings.json`` made it already). Returns the project's trust."""
    from cairn.config.claude_hooks import project_claude_hooks, user_claude_hooks

    found = []
    if settings.claude_hooks.user:
        user = user_claude_hooks()
        found += [user] if user is not None else []
    if settings.claude_hooks.project:
        root = project_settings_path(cwd).parent.parent
        project = project_claude_hooks(root)
        if not any(hooks.hooks for hooks in project):
            found += project  # nothing to run: only what could not be read, said
        else:
            if trust is None:
                from cairn.config.trust import project_trust

                trust = project_trust(cwd, user_settings=user_raw)
                if not trust.trusted:
                    warnings.append(trust.notice)
            if trust.trusted:
                found += project
    for hooks in found:
        warnings.extend(hooks.warnings)
        for event, groups in hooks.hooks.items():
            name = _HOOK_FIELDS[event]
            added = [HookMatcher.model_validate(group, by_name=False) for group in groups]
            setattr(settings.hooks, name, [*getattr(settings.hooks, name), *added])
        if hooks.hooks:
            used.append(hooks.path)
    return trust


_HOOK_FIELDS = {info.alias or name: name for name, info in HooksSettings.model_fields.items()}


def _gate_project_file(
    cwd: Path,
    raw: dict[str, Any],
    validated: Settings,
    user_raw: dict[str, Any],
    warnings: list[str],
) -> tuple[dict[str, Any], ProjectTrust]:
    """The project file as far as its folder's trust allows (see :mod:`cairn.config.trust`),
    decided on ``validated``, the file as the settings read it."""
    from cairn.config.trust import PROJECT_IGNORED_KEYS, project_trust, strip_untrusted

    security = raw.get("security")
    if isinstance(security, dict) and any(key in security for key in PROJECT_IGNORED_KEYS):
        warnings.append(
            "project settings cannot trust their own folder: security.trustedFolders and "
            "security.folderTrust are read from your user settings only"
        )
    trust = project_trust(cwd, user_settings=user_raw, project_settings=raw, validated=validated)
    if not trust.trusted:
        warnings.append(trust.notice)
    return strip_untrusted(raw, trust, validated), trust


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
    """One settings file as a dict; :class:`SettingsError` names the file (and line) if unusable.

    Only a regular file of at most :data:`MAX_SETTINGS_BYTES` is read (a FIFO is never opened,
    so it cannot hang start-up); the text must be UTF-8 (a leading BOM is allowed) and strict
    JSON: no ``NaN`` or ``Infinity``, numbers of at most :data:`MAX_NUMBER_DIGITS` digits that
    fit a float, objects and lists nested at most :data:`MAX_SETTINGS_DEPTH` deep.
    """
    return _parse_settings(path, _read_text(path))


def _read_text(path: Path) -> str:
    try:
        data = read_regular_file(path, max_bytes=MAX_SETTINGS_BYTES)
    except NotRegularFile as exc:
        raise SettingsError(
            f"{path}: settings must be a regular file, not {exc.kind}; remove or replace it"
        ) from None
    except FileTooLarge:
        raise SettingsError(
            f"{path}: settings file is larger than {MAX_SETTINGS_BYTES >> 20} MB"
        ) from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read settings ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SettingsError(
            f"{path} line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file "
            "as UTF-8"
        ) from None


def _parse_settings(path: Path, text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    deep = _too_deep_at(text, MAX_SETTINGS_DEPTH)
    if deep is not None:
        raise SettingsError(
            f"{path} line {_line_at(text, deep)}: objects and lists are nested more than "
            f"{MAX_SETTINGS_DEPTH} levels deep"
        )
    try:
        data = json.loads(
            text, parse_constant=_refuse_constant, parse_int=_parse_int, parse_float=_parse_float
        )
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path} line {exc.lineno} column {exc.colno}: invalid JSON ({exc.msg})"
        ) from None
    except _BadNumber as exc:
        raise SettingsError(f"{path} line {_line_of_text(text, exc.text)}: {exc}") from None
    except RecursionError:  # guarded by the depth check; kept so no input can crash start-up
        raise SettingsError(f"{path}: objects and lists are nested too deeply") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: settings must be a JSON object, not {type(data).__name__}")
    return data


class _BadNumber(ValueError):
    def __init__(self, text: str, message: str) -> None:
        super().__init__(message)
        self.text = text


def _refuse_constant(name: str) -> Any:
    raise _BadNumber(name, f"{name} is not a JSON number; write a number or null")


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise _BadNumber(text, f"a number of {len(text)} digits is too long for a setting")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_DIGITS:
        raise _BadNumber(text, f"a number of {len(text)} characters is too long for a setting")
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(text, f"{text} is too large for a number")
    return value


def _too_deep_at(text: str, limit: int) -> int | None:
    """The offset where nesting first exceeds ``limit`` (outside strings), or ``None``."""
    depth = 0
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return index
        elif char in "]}":
            depth -= 1
    return None


def _line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _line_of_text(text: str, needle: str) -> int:
    offset = text.find(needle)
    return _line_at(text, offset) if offset >= 0 else 1


def _validate_file(path: Path, raw: dict[str, Any], warnings: list[str]) -> Settings:
    return settings_as_read(raw, str(path), _text(path), warnings)


def settings_as_read(
    raw: Mapping[str, Any], where: str, text: str = "", warnings: list[str] | None = None
) -> Settings:
    """A settings file's object as cairn uses it: ``$VAR`` references expanded, then
    :func:`validate_settings`; every decision about a file (trust among them) reads this.
    ``warnings`` gets a line per key the settings do not read."""
    settings = validate_settings(_interpolate(raw), where, text)
    for key, alias in _unknown_keys(settings, ""):
        if warnings is None:
            break
        if alias:
            warnings.append(
                f"{where}: `{key}` is ignored: settings keys are written in camelCase; "
                f"write `{alias}`"
            )
        else:
            warnings.append(f"{where}: unknown setting `{key}` is ignored")
    _forget_python_names(settings)
    return settings


def _forget_python_names(model: Section) -> None:
    """Drop the unknown keys that are a field's Python name (``approval_mode``): kept beside
    the field, ``model_dump`` would write them over it. Only what a file set is looked at."""
    fields = type(model).model_fields
    extra = model.model_extra or {}
    for name in [k for k in extra if k in fields]:
        del extra[name]
    for attr in model.model_fields_set & fields.keys():
        value = getattr(model, attr)
        if isinstance(value, dict):
            children = list(value.values())
        else:
            children = value if isinstance(value, list) else [value]
        for child in children:
            if isinstance(child, Section):
                _forget_python_names(child)


def validate_settings(raw: Mapping[str, Any], where: str, text: str) -> Settings:
    """``raw`` (a settings file's object) as :class:`Settings`, read with ``by_name=False``;
    :class:`SettingsError` says every invalid key of ``where`` (see
    :func:`describe_validation_error`).

    A key is read only in the camelCase spelling the files use (``approvalMode``), as Qwen Code
    reads them: a field's Python name (``approval_mode``) is an unknown key, kept aside and never
    used, so whatever inspects a file's keys sees every key that takes effect. The sections
    ``raw`` does not name keep their defaults.
    """
    data = dict(raw)
    try:
        return Settings.model_validate(data, by_name=False)
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc, where, text, "", data)) from None


def _unknown_keys(model: Section, prefix: str) -> list[tuple[str, str]]:
    """``(key, the camelCase key meant)`` of each key the settings do not read; the second is
    "" unless the key is a setting's Python name (``tools.approval_mode``)."""
    fields = type(model).model_fields
    found = [
        (f"{prefix}{k}", f"{prefix}{fields[k].alias}" if k in fields and fields[k].alias else "")
        for k in (model.model_extra or {})
    ]
    for attr, info in fields.items():
        value = getattr(model, attr)
        alias = info.alias or attr
        if isinstance(value, Section):
            found += _unknown_keys(value, f"{prefix}{alias}.")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Section):
                    found += _unknown_keys(item, f"{prefix}{alias}[{i}].")
        elif isinstance(value, dict):  # mcpServers: entries by name
            for name, item in value.items():
                if isinstance(item, Section):
                    found += _unknown_keys(item, f"{prefix}{alias}.{name}.")
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


# What a value of the wrong shape fails with: a union whose every branch fails so is one problem.
_MISMATCHES = frozenset(
    {
        "bool_type",
        "int_type",
        "float_type",
        "string_type",
        "list_type",
        "dict_type",
        "model_type",
        "literal_error",
    }
)


class _Problem(Value):
    path: tuple[str | int, ...]  # keys and list indexes into the validated value
    branches: tuple[tuple[int, str], ...]  # (length of path, pydantic's name) of each union choice
    kind: str
    expected: str
    got: Any


def describe_validation_error(
    exc: ValidationError, where: str, text: str, prefix: str = "", data: Any = MISSING
) -> str:
    """One line per problem: the file (and line), the key under ``prefix`` as written
    (``hooks.PreToolUse[0].command``), what it must be.

    ``data`` is the value that was validated: with it, the names pydantic gives the branches of a
    union (``str``, ``list[str]``) are told from keys, and a key that may take several shapes gets
    the problems of the shape its value has, or one line naming every shape it may take.
    """
    problems = _pick([_problem(error, data) for error in exc.errors()], 0)
    lines = []
    for problem in problems:
        path = [*(prefix.split(".") if prefix else []), *problem.path]
        key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        last = next((p for p in reversed(path) if isinstance(p, str)), "")
        line_no = _line_of(text, last) if last and text else None
        at = f"{where} line {line_no}" if line_no else where
        got = json.dumps(problem.got, default=str)[:60]
        lines.append(f"{at}: `{key or '(top level)'}` must be {problem.expected} (got {got})")
    return "\n".join(lines)


def _problem(error: ErrorDetails, data: Any) -> _Problem:
    expected = _EXPECTED.get(error["type"])
    if expected is None:
        expected = error["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
        expected = expected.rstrip(".")
    loc = list(error["loc"])
    missing = loc.pop() if error["type"] == "missing" and loc else None  # a key not in the input
    found = None if data is MISSING else _walk(loc, 0, data, error.get("input"), (), ())
    if found is None:  # no data: drop the steps pydantic names after validators and literals
        path = tuple(p for p in loc if not str(p).startswith(("function-", "literal")))
        found = path, ()
    path, branches = found
    if missing is not None:
        path = (*path, missing)
    return _Problem(path, branches, error["type"], expected, error.get("input"))


def _walk(
    loc: list[Any],
    index: int,
    node: Any,
    target: Any,
    path: tuple[str | int, ...],
    branches: tuple[tuple[int, str], ...],
) -> tuple[tuple[str | int, ...], tuple[tuple[int, str], ...]] | None:
    """``loc[index:]`` read from ``node`` as keys and indexes down to the error's input
    (``target``), each other step being a union's branch; None when no reading gets there."""
    if index == len(loc):
        return (path, branches) if node == target else None
    step = loc[index]
    is_key = isinstance(node, dict) and isinstance(step, str) and step in node
    is_index = isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)
    if is_key or is_index:
        found = _walk(loc, index + 1, node[step], target, (*path, step), branches)
        if found is not None:
            return found
    if isinstance(step, str):  # a branch's name (or a validator's), not a key
        return _walk(loc, index + 1, node, target, path, (*branches, (len(path), step)))
    return None


def _pick(problems: list[_Problem], level: int) -> list[_Problem]:
    """At each union (the ``level``-th one on the way), the problems of the branches that fit
    the value (it has their shape, or they go deeper); when none fits, one problem saying what
    the value may be."""
    picked: list[_Problem | tuple[Any, ...]] = []
    unions: dict[tuple[Any, ...], dict[str, list[_Problem]]] = {}
    for problem in problems:
        if len(problem.branches) <= level:
            picked.append(problem)
            continue
        depth, branch = problem.branches[level]
        site = (depth, problem.path[:depth])
        if site not in unions:
            unions[site] = {}
            picked.append(site)
        unions[site].setdefault(branch, []).append(problem)
    out: list[_Problem] = []
    for item in picked:
        if isinstance(item, _Problem):
            out.append(item)
            continue
        depth, path = item
        branches = unions[item]
        fitting = [
            group
            for group in branches.values()
            if any(len(p.path) > depth or p.kind not in _MISMATCHES for p in group)
        ]
        if fitting:
            out += _pick([p for group in fitting for p in group], level + 1)
        else:
            shapes = dict.fromkeys(p.expected for group in branches.values() for p in group)
            got = next(iter(branches.values()))[0].got
            out.append(_Problem(path, (), "union", " or ".join(shapes), got))
    return out


def _line_of(text: str, key: str) -> int | None:
    needle = f'"{key}"'
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return None


def _text(path: Path) -> str:
    """The file's text for locating a key's line in an error ("" when it cannot be read)."""
    try:
        return _read_text(path)
    except SettingsError:
        return ""


def referenced_variables(value: Any) -> set[str]:
    """The environment variables a settings file's object names as ``$VAR`` or ``${VAR}``:
    all :func:`settings_as_read` reads of the environment."""
    if isinstance(value, str):
        return {m.group(1) or m.group(2) for m in _ENV_REF.finditer(value)}
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(referenced_variables(v) for v in value))
    return set()


def _interpolate(value: Any) -> Any:
    if isinstance(value, str):
        return _ENV_REF.sub(lambda m: os.environ.get(m.group(1) or m.group(2), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v) for v in value]
    return value
