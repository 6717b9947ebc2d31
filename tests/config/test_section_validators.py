"""A settings section's validator is built only when a file names the section, or on use.

Building all of them cost every start-up ~60 M instructions (benchmarks/README.md). Which
validators exist is checked in a fresh interpreter, since other tests build them all."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from cairn.config import settings as schema
from cairn.testing import ScriptedServer, reply

BUILT = (
    "import sys\n"
    "from pydantic import BaseModel\n"
    "import cairn.config.settings as s\n"
    "def built():\n"
    "    return sorted(n for n, c in vars(s).items() if isinstance(c, type)"
    " and issubclass(c, BaseModel) and c.__module__ == s.__name__ and c.__pydantic_complete__)\n"
)


def _sections(model: type[BaseModel]) -> list[type[schema._Section]]:
    """``model``'s sections, theirs, and so on: every model whose default a field uses."""
    found = []
    for info in model.model_fields.values():
        if inspect.isclass(info.annotation) and issubclass(info.annotation, schema._Section):
            found += [info.annotation, *_sections(info.annotation)]
    return found


SECTIONS = [schema.Settings, *_sections(schema.Settings)]


def _project(tmp_path: Path, settings: dict[str, object]) -> Path:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".cairn").mkdir()
    (project / ".cairn" / "settings.json").write_text(json.dumps(settings))
    return project


def _run(
    code: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter in ``cwd``, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "validators"),
    [
        ({"memory": {"enableManagedAutoMemory": False}}, ["MemorySettings"]),
        (
            {"memory": {"enableManagedAutoMemory": False}, "tools": {"approvalMode": "plan"}},
            ["MemorySettings", "ToolsSettings"],
        ),
    ],
)
def test_a_run_builds_the_validators_of_the_sections_its_settings_name(
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    tmp_path: Path,
    settings: dict[str, object],
    validators: list[str],
) -> None:
    project = _project(tmp_path, settings)
    scripted_server.enqueue(reply("plain"))
    probe = (
        BUILT + "import atexit, json\n"
        "atexit.register(lambda: sys.stderr.write('BUILT ' + json.dumps(built()) + '\\n'))\n"
        "from cairn.cli.main import main\n"
        "sys.argv = ['cairn', '-p', 'hi']\n"
        "main()\n"
    )
    done = _run(probe, project, cairn_env)

    assert done.stdout == "plain\n"
    line = next(x for x in done.stderr.splitlines() if x.startswith("BUILT "))
    assert json.loads(line.removeprefix("BUILT ")) == validators


def test_a_section_no_file_names_still_validates_assignment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/settings`` changes a loaded setting by assignment: a section made without its
    validator builds it then, and refuses a bad value as before."""
    project = _project(tmp_path, {"memory": {"enableManagedAutoMemory": False}})
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    code = BUILT + (
        "from pathlib import Path\n"
        "from pydantic import ValidationError\n"
        "from cairn.config.loader import load_settings\n"
        "settings = load_settings(Path.cwd()).settings\n"
        "print(built())\n"
        "try:\n"
        "    settings.tools.approval_mode = 'sometimes'\n"
        "except ValidationError as exc:\n"
        "    print(exc.errors()[0]['type'])\n"
        "settings.tools.approval_mode = 'yolo'\n"
        "print(settings.tools.approval_mode, built())\n"
    )

    lines = _run(code, project).stdout.splitlines()

    assert lines == [
        "['MemorySettings']",
        "literal_error",
        "yolo ['MemorySettings', 'ToolsSettings']",
    ]


@pytest.mark.parametrize("section", SECTIONS, ids=lambda model: model.__name__)
def test_a_default_made_without_validation_is_the_validated_default(
    section: type[schema._Section],
) -> None:
    made, validated = section.defaults(), section()

    assert made == validated
    assert repr(made) == repr(validated)
    assert made.model_fields_set == validated.model_fields_set == set()
    assert made.model_extra == validated.model_extra == {}
    for name in section.model_fields:
        value = getattr(made, name)
        assert type(value) is type(getattr(validated, name))
        if isinstance(value, BaseModel | list | dict):  # a fresh one each time, never shared
            assert value is not getattr(section.defaults(), name)
