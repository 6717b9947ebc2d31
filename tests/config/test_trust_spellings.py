"""Every key of the settings schema, in every spelling, against the trust decision.

Generated from :class:`cairn.config.settings.Settings`, so a key added to the schema is covered
the day it is added. For each key, each way of writing it (the camelCase key files use, the
field's Python name at any level, a section written in short as ``true``/``false``) and each
kind of value it takes, a project settings file setting only that key is loaded in a folder that
was never trusted. The key may change the settings only if :data:`UNTRUSTED_PROJECT_KEYS` allows
it (with that value); a key it does not allow makes the folder untrusted and changes nothing.
In a trusted folder the camelCase key does change the settings (the value is a real one) and no
other spelling does (one reading).

Regression (#24, critical): ``tools.approval_mode``, ``mcp_servers``,
``security.auth.base_url`` and five more took effect in folders never trusted, because the
settings accepted a key's Python name and the trust check looked for the camelCase key only.
"""

from __future__ import annotations

import itertools
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from cairn.config.loader import SettingsError, load_settings
from cairn.config.sections import FieldInfo, Section
from cairn.config.settings import Settings
from cairn.config.trust import (
    PROJECT_IGNORED,
    UNTRUSTED_PROJECT_KEYS,
    project_trust,
    trust_this_run,
)

MAX_VALUES_PER_KEY = 12  # candidate values tried per key (a model entry has many)


class Key:
    """One setting: its field names and camelCase keys from ``Settings`` down, its type."""

    def __init__(self, fields: tuple[tuple[str, FieldInfo], ...]) -> None:
        self.names = tuple(name for name, _ in fields)
        self.aliases = tuple(info.alias or name for name, info in fields)
        self.info = fields[-1][1]

    @property
    def dotted(self) -> str:
        return ".".join(self.aliases)

    @property
    def ignored(self) -> bool:
        """A key a project file never sets, trusted or not (its folder's trust)."""
        return any(self.dotted == k or self.dotted.startswith(k + ".") for k in PROJECT_IGNORED)

    def spellings(self) -> Iterator[tuple[tuple[str, ...], bool]]:
        """Each way to write the key's path, and whether it is the one files use."""
        pairs = zip(self.aliases, self.names, strict=True)
        choices = [dict.fromkeys((alias, name)) for alias, name in pairs]
        for path in itertools.product(*choices):
            yield path, path == self.aliases

    def __repr__(self) -> str:
        return self.dotted


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Section)


def schema_keys(
    model: type[Section] = Settings, above: tuple[tuple[str, FieldInfo], ...] = ()
) -> list[Key]:
    keys: list[Key] = []
    for name, info in model.model_fields.items():
        here = (*above, (name, info))
        if _is_section(info.annotation):
            keys += schema_keys(info.annotation, here)
        else:
            keys.append(Key(here))
    return keys


def schema_sections(
    model: type[Section] = Settings, above: tuple[tuple[str, FieldInfo], ...] = ()
) -> list[Key]:
    sections: list[Key] = []
    for name, info in model.model_fields.items():
        if _is_section(info.annotation):
            here = (*above, (name, info))
            sections += [Key(here), *schema_sections(info.annotation, here)]
    return sections


def candidates(annotation: Any) -> list[Any]:
    """Values of every shape ``annotation`` takes, spelled every way a file could."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is bool:
        return [True, False]
    if annotation is int:
        return [0, 1, 3, 7, 10_000]
    if annotation is float:
        return [0.5, 3.0, 10_000.0]
    if annotation is str:
        return ["x-value", "/tmp/outside/file"]
    if annotation is type(None):
        return [None]
    if origin is Literal:
        return list(args)
    if origin in (typing.Union, types.UnionType):
        return [value for arg in args for value in candidates(arg)]
    if origin is list:
        return [[item] for item in candidates(args[0])]
    if origin is dict:
        return [{"NAME": item} for item in candidates(args[1])]
    if _is_section(annotation):
        return model_entries(annotation)
    raise AssertionError(f"no candidate values for {annotation!r}: teach this test the type")


def model_entries(model: type[Section]) -> list[dict[str, Any]]:
    """Entries of ``model`` (a list item, a dict value): the required fields, then each other
    field added in turn, by its camelCase key and by its Python name."""
    fields = model.model_fields
    base = {
        info.alias or name: _first_valid(model, name, info)
        for name, info in fields.items()
        if info.is_required()
    }
    entries = [base]
    for name, info in fields.items():
        if info.is_required():
            continue
        for spelling in dict.fromkeys((info.alias or name, name)):
            for value in candidates(info.annotation)[:3]:
                entries.append({**base, spelling: value})
    return entries


def _first_valid(model: type[Section], name: str, info: FieldInfo) -> Any:
    if name == "command":  # an MCP server or a hook: a program
        return "true"
    if name == "hooks":
        return [{"type": "command", "command": "true"}]
    values = candidates(info.annotation)
    return values[0]


def nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    for part in reversed(path):
        value = {part: value}
    return value  # type: ignore[no-any-return]


def read(settings: Settings, names: tuple[str, ...]) -> Any:
    value: Any = settings
    for name in names:
        value = getattr(value, name)
    return value.model_dump() if isinstance(value, Section) else value


def allowlisted(dotted: str, settings: Settings, key: Key) -> bool:
    """What :data:`UNTRUSTED_PROJECT_KEYS` says of ``key`` with the value ``settings`` hold."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        entry = ".".join(parts[:end])
        if entry in UNTRUSTED_PROJECT_KEYS:
            test = UNTRUSTED_PROJECT_KEYS[entry]
            value: Any = settings
            for name in key.names[:end]:
                value = getattr(value, name)
            return test is None or bool(test(value))
    return False


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / ".cairn").mkdir()
    yield root
    trust_this_run(False)


def load(project: Path, data: dict[str, Any], *, trusted: bool) -> Settings | None:
    (project / ".cairn" / "settings.json").write_text(json.dumps(data))
    trust_this_run(trusted)
    try:
        return load_settings(project).settings
    except SettingsError:
        return None  # a value this key refuses: nothing to decide
    finally:
        trust_this_run(False)


DEFAULTS = Settings.from_valid({}, set())


@pytest.mark.matrix  # locally a tenth a day (tests/conftest.py); CI all
@pytest.mark.parametrize("key", schema_keys(), ids=repr)
def test_every_spelling_of_a_key_is_allowlisted_or_needs_trust(project: Path, key: Key) -> None:
    values = candidates(key.info.annotation)[:MAX_VALUES_PER_KEY]
    default = read(DEFAULTS, key.names)
    effective = 0
    for value, (path, canonical) in itertools.product(values, key.spellings()):
        data = nest(path, value)
        untrusted = load(project, data, trusted=False)
        trusted = load(project, data, trusted=True)
        if untrusted is None or trusted is None:
            continue
        changed = read(untrusted, key.names) != default
        took_effect = read(trusted, key.names) != default
        where = f"{json.dumps(data)}"
        if not canonical or key.ignored:
            assert not changed and not took_effect, f"{where} is read: one spelling only"
            continue
        effective += took_effect
        if changed:
            assert allowlisted(key.dotted, trusted, key), f"{where} applied without trust"
        elif took_effect:
            assert not project_trust(project).trusted, f"{where} dropped but not listed"
    if not key.ignored:
        assert effective, f"no value tried for {key} takes effect: the test proves nothing"


@pytest.mark.matrix
@pytest.mark.parametrize("section", schema_sections(), ids=repr)
def test_a_section_written_in_short_is_decided_like_its_keys(project: Path, section: Key) -> None:
    """``"sandbox": false`` is ``{"enabled": false}``: any non-object a section's validator
    turns into keys is decided on those keys."""
    default = read(DEFAULTS, section.names)
    for value, (path, canonical) in itertools.product(
        [True, False, "x", 1, None, []], section.spellings()
    ):
        data = nest(path, value)
        untrusted = load(project, data, trusted=False)
        if untrusted is None or read(untrusted, section.names) == default:
            continue
        assert canonical, f"{json.dumps(data)} is read: one spelling only"
        trusted = load(project, data, trusted=True)
        assert trusted is not None
        keys = [k for k in schema_keys() if k.names[: len(section.names)] == section.names]
        for key in keys:
            if read(untrusted, key.names) != read(DEFAULTS, key.names):
                assert allowlisted(key.dotted, trusted, key), f"{json.dumps(data)}: {key}"


def test_the_allowlist_names_only_keys_of_the_schema() -> None:
    """A key renamed in the schema cannot leave a stale entry that allows nothing."""
    known = {key.dotted for key in schema_keys()} | {s.dotted for s in schema_sections()}

    assert set(UNTRUSTED_PROJECT_KEYS) - known == set()
    assert set(PROJECT_IGNORED) - known == set()
