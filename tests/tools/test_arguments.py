"""Tool arguments as models send them: accepted, or a ToolError the model can read."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.tools.arguments import optional_bool, optional_int, require_str
from cairn.tools.base import ToolError


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
