"""Importing the ACP SDK: fast, complete, and only where ``--acp`` needs it."""

from __future__ import annotations

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
        "assert f._update_fields_from_docstrings.__name__ == '_update_fields_from_docstrings'"
    )
    assert _loads_acp(code) is True
