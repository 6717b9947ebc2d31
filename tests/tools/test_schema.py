"""The tool-parameter schema builders give the JSON the model is sent, key for key."""

from __future__ import annotations

import json

from cairn.tools.ask_user_question import AskUserQuestionTool
from cairn.tools.schema import object_schema, string_property
from cairn.tools.shell import ShellTool
from cairn.tools.web_fetch import WebFetchTool


def test_an_object_schema_names_its_type_properties_and_required_in_that_order() -> None:
    schema = object_schema({"path": string_property("Where.")}, required=["path"])

    assert json.dumps(schema) == (
        '{"type": "object", "properties": {"path": {"type": "string", "description": "Where."}}, '
        '"required": ["path"]}'
    )


def test_built_schemas_read_as_the_written_ones_did() -> None:
    """Every built-in declaration's JSON was compared byte for byte when the builders came in;
    these pin a few of them, nesting included."""
    assert ShellTool.parameters["required"] == ["command"]
    assert ShellTool.parameters["properties"]["command"] == {
        "type": "string",
        "description": "The bash command to run.",
    }
    assert list(WebFetchTool.parameters) == ["type", "properties", "required"]
    question = AskUserQuestionTool.parameters["properties"]["questions"]["items"]
    assert question["required"] == ["question", "options"]
    assert question["properties"]["options"]["items"]["properties"]["label"] == {
        "type": "string",
        "description": "The choice, in a few words.",
    }
