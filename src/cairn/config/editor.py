"""Change an editable setting while cairn runs, and keep the change in the right settings file.

``/settings`` uses this: the value is parsed and validated, written atomically into the settings
file that decides it (the project's ``.cairn/settings.json`` if that file sets the key, else the
user's ``settings.json``), and then applied to the running :class:`Settings` object, so the
change needs no restart. Either both happen or neither does.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cairn.config.loader import SettingsError, project_settings_path, read_settings_file
from cairn.config.paths import user_settings_path
from cairn.config.sections import Section, ValidationError
from cairn.config.settings import Settings, editable_fields
from cairn.fsutil import atomic_write_json

__all__ = [
    "EditableSetting",
    "SettingKind",
    "editable_settings",
    "find_editable",
    "save_setting",
    "settings_file_for",
    "write_setting",
]

SettingKind = Literal["bool", "choice", "number", "text"]
_TRUE = ("true", "on", "yes", "1")
_FALSE = ("false", "off", "no", "0")


@dataclass(frozen=True)
class EditableSetting:
    """One setting ``/settings`` may change: where it lives and what values it takes."""

    key: str  # dotted camelCase, as in settings.json
    path: tuple[str, ...]  # attribute names from Settings down to the field
    description: str
    annotation: Any

    @property
    def kind(self) -> SettingKind:
        if self.annotation is bool:
            return "bool"
        if typing.get_origin(self.annotation) is Literal:
            return "choice"
        if self.annotation in (int, float):
            return "number"
        return "text"

    @property
    def choices(self) -> tuple[str, ...]:
        if self.kind == "bool":
            return ("true", "false")
        if self.kind == "choice":
            return tuple(str(v) for v in typing.get_args(self.annotation))
        return ()

    def get(self, settings: Settings) -> Any:
        return getattr(self._section(settings), self.path[-1])

    def set(self, settings: Settings, value: Any) -> None:
        """Assign ``value`` to the running settings; a bad value raises :class:`SettingsError`."""
        section = self._section(settings)
        try:
            setattr(section, self.path[-1], value)
        except ValidationError as exc:
            raise SettingsError(f"`{self.key}`: {exc.errors()[0]['msg']}") from None

    def parse(self, raw: str) -> Any:
        """The value typed as text (``true``, ``7.5``, ``auto-edit``), or :class:`SettingsError`."""
        text = raw.strip()
        if self.kind == "bool":
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise SettingsError(f"`{self.key}` must be true or false (got {text!r})")
        if self.kind == "choice":
            if text in self.choices:
                return text
            raise SettingsError(f"`{self.key}` must be one of {', '.join(self.choices)}")
        if self.kind == "number":
            return self._number(text)
        return text

    def validate(self, value: Any) -> Any:
        """``value`` as the settings model would store it; :class:`SettingsError` if refused."""
        # A throwaway copy: the running settings stay as they are until the file is saved.
        probe = self._section(Settings.model_validate({}))
        try:
            setattr(probe, self.path[-1], value)
        except ValidationError as exc:
            raise SettingsError(f"`{self.key}`: {exc.errors()[0]['msg']}") from None
        return getattr(probe, self.path[-1])

    def _number(self, text: str) -> int | float:
        try:
            number = float(text)
        except ValueError:
            raise SettingsError(f"`{self.key}` must be a number (got {text!r})") from None
        if self.annotation is int:
            if not number.is_integer():
                raise SettingsError(f"`{self.key}` must be a whole number (got {text!r})")
            return int(number)
        return number

    def _section(self, settings: Settings) -> Section:
        section: Section = settings
        for attr in self.path[:-1]:
            section = getattr(section, attr)
        return section


def editable_settings() -> list[EditableSetting]:
    """Every setting marked editable in the schema, in schema order."""
    found: list[EditableSetting] = []
    for key, model, attr in editable_fields():
        info = model.model_fields[attr]
        found.append(
            EditableSetting(
                key=key,
                path=_attribute_path(key),
                description=info.description or "",
                annotation=info.annotation,
            )
        )
    return found


def find_editable(key: str) -> EditableSetting:
    for setting in editable_settings():
        if setting.key == key:
            return setting
    names = ", ".join(s.key for s in editable_settings())
    raise SettingsError(f"`{key}` cannot be changed from /settings; editable: {names}")


def settings_file_for(key: str, cwd: Path, *, user_path: Path | None = None) -> Path:
    """The file whose ``key`` wins: the project file if it sets the key, else the user's."""
    project = project_settings_path(cwd)
    if project.is_file():
        try:
            data = _read(project)
        except SettingsError:
            data = {}
        if _has_key(data, key.split(".")):
            return project
    return user_path or user_settings_path()


def write_setting(path: Path, key: str, value: Any) -> None:
    """Set ``key`` in the JSON file at ``path`` (created if missing), keeping every other key.

    The file is replaced atomically. A file that is not a JSON object is left untouched and
    reported with :class:`SettingsError`.
    """
    data = _read(path) if path.exists() else {}
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise SettingsError(f"{path}: `{part}` must be an object to hold `{key}`")
        node = child
    node[parts[-1]] = value
    try:
        atomic_write_json(path, data)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot save settings ({exc.strerror or exc})") from None


def save_setting(
    settings: Settings,
    key: str,
    value: Any,
    *,
    cwd: Path,
    user_path: Path | None = None,
) -> Path:
    """Validate ``value``, persist it, then apply it to the running ``settings``.

    Returns the file written. Raises :class:`SettingsError` (nothing changed) on a bad value or
    an unwritable file.
    """
    setting = find_editable(key)
    stored = setting.validate(value)
    path = settings_file_for(key, cwd, user_path=user_path)
    write_setting(path, key, stored)
    setting.set(settings, stored)
    return path


def _attribute_path(key: str) -> tuple[str, ...]:
    model: type[Section] = Settings
    attrs: list[str] = []
    for part in key.split("."):
        attr = next(a for a, info in model.model_fields.items() if (info.alias or a) == part)
        attrs.append(attr)
        annotation = model.model_fields[attr].annotation
        if isinstance(annotation, type) and issubclass(annotation, Section):
            model = annotation
    return tuple(attrs)


def _has_key(data: dict[str, Any], parts: Sequence[str]) -> bool:
    node: Any = data
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _read(path: Path) -> dict[str, Any]:
    try:
        return read_settings_file(path)
    except SettingsError as exc:
        raise SettingsError(f"{exc}; fix the file before changing settings from cairn") from None
