"""Settings read without pydantic say what the pydantic models said.

``data/settings_cases.json`` was written by the pydantic models cairn used until issue 32
(``settings_cases.py`` generates its 2,359 settings files from the schema: every key with
every shape of value, hooks, MCP servers and model entries of every kind, unknown keys and
Python names): the same files now read the same values, keys set and warnings, or fail with
the same message, line for line.
"""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from cairn.config.loader import settings_as_read
from cairn.config.sections import Field, Section, ValidationError, to_camel
from cairn.config.settings import Settings, ToolsSettings

from .settings_cases import cases, outcome

RECORDED = json.loads((Path(__file__).parent / "data" / "settings_cases.json").read_text())
CASES = cases(Settings)  # in the order their keys were written (the recording sorts them)


def test_the_recorded_cases_are_the_schema_s_cases() -> None:
    """A key added to the schema since the recording is not covered: record its cases with
    ``python -m tests.config.record_new_cases``."""
    assert [case["settings"] for case in RECORDED] == CASES


@pytest.mark.matrix  # locally a tenth a day (tests/conftest.py); CI all
@pytest.mark.parametrize("index", range(len(RECORDED)))
def test_a_settings_file_reads_as_the_pydantic_models_read_it(index: int) -> None:
    assert outcome(settings_as_read, CASES[index]) == RECORDED[index]["outcome"]


@pytest.mark.parametrize(
    "name",
    ["enabled", "max_file_size_mb", "mcp_servers", "top_p", "a1b", "x_2y", "user_prompt_submit"],
)
def test_keys_in_files_are_pydantic_s_camel_case(name: str) -> None:
    expected = {
        "enabled": "enabled",
        "max_file_size_mb": "maxFileSizeMb",
        "mcp_servers": "mcpServers",
        "top_p": "topP",
        "a1b": "a1B",
        "x_2y": "x2Y",
        "user_prompt_submit": "userPromptSubmit",
    }
    assert to_camel(name) == expected[name]


class _Sample(Section):
    count: int = Field(1, ge=0)
    names: list[str] = Field(default_factory=list)
    tools: ToolsSettings = Field(default_factory=ToolsSettings.defaults)


def test_assignment_is_validated_and_marks_the_field_set() -> None:
    sample = _Sample()
    with pytest.raises(ValidationError) as failed:
        sample.count = -1
    assert failed.value.errors()[0]["type"] == "greater_than_equal"
    assert sample.count == 1 and sample.model_fields_set == set()

    sample.count = 3

    assert sample.count == 3 and sample.model_fields_set == {"count"}


def test_copies_share_nothing_when_deep_and_keep_what_was_set() -> None:
    sample = _Sample.model_validate({"names": ["a"], "other": {"x": 1}})

    deep, shallow = sample.model_copy(deep=True), sample.model_copy()
    deep.names.append("b")
    deep.tools.approval_mode = "yolo"

    assert sample.names == ["a"] and sample.tools.approval_mode == "default"
    assert shallow.names is sample.names
    assert deep.model_fields_set == sample.model_fields_set == {"names", "other"}
    assert deep.model_extra == {"other": {"x": 1}} and deep.other == {"x": 1}
    assert copy.deepcopy(sample) == sample == pickle.loads(pickle.dumps(sample))  # noqa: S301 - ours


def test_a_python_name_reads_only_when_names_are_allowed() -> None:
    by_name = _Sample.model_validate({"count": 2}).count
    only_keys = _Sample.model_validate({"count": 2}, by_name=False)

    assert by_name == 2
    assert only_keys.count == 2  # one word: its key is its name
    tools = ToolsSettings.model_validate({"approval_mode": "yolo"}, by_name=False)
    assert tools.approval_mode == "default" and tools.model_extra == {"approval_mode": "yolo"}


def test_a_dump_writes_keys_or_names_and_unknown_keys_last() -> None:
    sample = _Sample.model_validate({"names": ["a"], "zzz": 1})

    dumped: dict[str, Any] = sample.model_dump(by_alias=True)

    assert list(dumped)[-1] == "zzz"
    assert dumped["tools"]["approvalMode"] == "default"
    assert sample.model_dump(exclude_unset=True) == {"names": ["a"], "zzz": 1}
