"""A section's defaults are made without validation and equal the validated defaults, and a
loaded section still validates what is assigned to it (``/settings``)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from cairn.config import settings as schema
from cairn.config.loader import load_settings
from cairn.config.sections import Section, ValidationError


def _sections(model: type[Section]) -> list[type[Section]]:
    """``model``'s sections, theirs, and so on: every model whose default a field uses."""
    found = []
    for info in model.model_fields.values():
        if inspect.isclass(info.annotation) and issubclass(info.annotation, Section):
            found += [info.annotation, *_sections(info.annotation)]
    return found


SECTIONS = [schema.Settings, *_sections(schema.Settings)]


def test_a_loaded_section_validates_assignment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/settings`` changes a loaded setting by assignment: a bad value is refused as a file's
    would be, a good one taken and marked set."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".cairn").mkdir()
    (project / ".cairn" / "settings.json").write_text(
        json.dumps({"memory": {"enableManagedAutoMemory": False}})
    )
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    settings = load_settings(project).settings

    with pytest.raises(ValidationError) as refused:
        settings.tools.approval_mode = "sometimes"
    settings.tools.approval_mode = "yolo"

    assert refused.value.errors()[0]["type"] == "literal_error"
    assert settings.tools.approval_mode == "yolo"
    assert "approval_mode" in settings.tools.model_fields_set


@pytest.mark.parametrize("section", SECTIONS, ids=lambda model: model.__name__)
def test_a_default_made_without_validation_is_the_validated_default(
    section: type[Section],
) -> None:
    made, validated = section.defaults(), section()

    assert made == validated
    assert repr(made) == repr(validated)
    assert made.model_fields_set == validated.model_fields_set == set()
    assert made.model_extra == validated.model_extra == {}
    for name in section.model_fields:
        value = getattr(made, name)
        assert type(value) is type(getattr(validated, name))
        if isinstance(value, Section | list | dict):  # a fresh one each time, never shared
            assert value is not getattr(section.defaults(), name)
