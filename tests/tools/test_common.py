from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.tools._common import (
    BuiltinTool,
    display_path,
    folder_phrase,
    optional_bool,
    optional_int,
    require_str,
)
from cairn.tools.base import ToolContext, ToolError, ToolResult


class Exploding(BuiltinTool):
    name = "exploding"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise KeyError("boom")


async def test_unexpected_exceptions_become_error_results(ctx: ToolContext) -> None:
    result = await Exploding().execute({}, ctx)

    assert result.error == "exploding failed unexpectedly: KeyError: 'boom'"


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (3.0, 3), ("12", 12), (None, None)])
def test_optional_int_accepts_integral_values(value: Any, expected: int | None) -> None:
    assert optional_int({"n": value}, "n") == expected


@pytest.mark.parametrize("value", [True, 2.5, "x", -1, [1]])
def test_optional_int_refuses_other_values(value: Any) -> None:
    with pytest.raises(ToolError, match="`n` must be an integer >= 0"):
        optional_int({"n": value}, "n")


@pytest.mark.parametrize(("value", "expected"), [(True, True), ("false", False), (None, False)])
def test_optional_bool_accepts_booleans_and_their_names(value: Any, expected: bool) -> None:
    assert optional_bool({"b": value}, "b") is expected


def test_require_str_refuses_blank_text_unless_allowed() -> None:
    with pytest.raises(ToolError, match="must not be empty"):
        require_str({"s": "  "}, "s")
    assert require_str({"s": ""}, "s", allow_empty=True) == ""


def test_display_path_is_workspace_relative_or_absolute(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"

    assert display_path(workspace.resolve() / "src" / "a.py", workspace) == "src/a.py"
    assert display_path(workspace.resolve(), workspace) == "."
    assert display_path(Path("/etc/hosts"), workspace) == "/etc/hosts"
    assert folder_phrase(".") == "the workspace"
