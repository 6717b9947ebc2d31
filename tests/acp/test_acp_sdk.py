"""Importing the ACP SDK: fast, complete, and only where ``--acp`` needs it."""

from __future__ import annotations

import json
import subprocess
import sys

CHECK = "import sys; {code}; print('acp' in sys.modules)"


def _loads_acp(code: str) -> bool:
    result = subprocess.run(
        [sys.executable, "-c", CHECK.format(code=code)], capture_output=True, text=True, check=True
    )
    return result.stdout.strip() == "True"


def test_importing_cairn_acp_does_not_import_the_sdk() -> None:
    assert _loads_acp("import cairn.acp") is False


def test_the_cli_module_does_not_import_the_sdk() -> None:
    assert _loads_acp("import cairn.cli.main") is False


def test_the_sdk_imported_without_field_docstrings_still_validates_and_serialises() -> None:
    code = (
        "from cairn.acp._sdk import import_sdk; import_sdk(); "
        "from acp.schema import PromptRequest, ToolCallProgress; "
        "r = PromptRequest.model_validate("
        "{'sessionId': 's', 'prompt': [{'type': 'text', 'text': 'hi'}]}); "
        "assert r.prompt[0].text == 'hi'; "
        "u = ToolCallProgress("
        "session_update='tool_call_update', tool_call_id='c', status='failed'); "
        "assert u.model_dump(by_alias=True, exclude_none=True) == "
        "{'toolCallId': 'c', 'status': 'failed', 'sessionUpdate': 'tool_call_update'}; "
        "import pydantic._internal._fields as f; "
        "assert f._update_fields_from_docstrings.__name__ == '_update_fields_from_docstrings'; "
        "from acp.agent.connection import _CREATE_ELICITATION_RESPONSE_ADAPTER as a; "
        "assert a.validate_python({'action': 'cancel'}).action == 'cancel'; "
        "import pydantic; assert pydantic.TypeAdapter.__init__.__name__ == '__init__'"
    )
    assert _loads_acp(code) is True


FIELDS = (
    "import inspect, json, pydantic; {imp}; import acp.schema as s; print(json.dumps(sorted("
    "[n, f, repr(i.annotation), i.alias, repr(i.default), repr(i.metadata), "
    "repr(i.discriminator)] "
    "for n, c in vars(s).items() if inspect.isclass(c) and issubclass(c, pydantic.BaseModel) "
    "for f, i in c.model_fields.items())))"
)


def _schema_fields(imp: str) -> list[list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", FIELDS.format(imp=imp)], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def test_the_fast_import_gives_every_model_the_fields_an_ordinary_import_gives() -> None:
    """Reusing evaluated annotations (and skipping docstrings) changes no field of any model."""
    fast = _schema_fields("from cairn.acp._sdk import import_sdk; import_sdk()")
    ordinary = _schema_fields("import acp")

    assert len(fast) > 900  # every field of the ~270 models
    assert fast == ordinary
