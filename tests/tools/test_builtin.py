"""The built-in tools' base class: only cancellation escapes a call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.tools.base import ToolContext, ToolResult
from cairn.tools.builtin import BuiltinTool


class Exploding(BuiltinTool):
    name = "exploding"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise KeyError("boom")


async def test_unexpected_exceptions_become_error_results(ctx: ToolContext) -> None:
    result = await Exploding().execute({}, ctx)

    assert result.error == "exploding failed unexpectedly: KeyError: 'boom'"
