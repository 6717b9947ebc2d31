"""The public surface of cairn.testing (users' tests import these names)."""

from __future__ import annotations

import pytest

import cairn.testing

PUBLIC = {
    "NEVER",
    "ScriptedFrontend",
    "UnexpectedRequest",
    "FastMCPServer",
    "RunningMcpServer",
    "RecordedRequest",
    "Reply",
    "ScriptedProvider",
    "ScriptedServer",
    "ToolCallSpec",
    "error_reply",
    "reply",
    "tool_call",
    "tool_calls",
}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(cairn.testing.__all__) == PUBLIC


def test_every_public_name_resolves() -> None:
    for name in cairn.testing.__all__:
        member = getattr(cairn.testing, name)
        module = type(member).__module__ if name.isupper() else member.__module__  # a constant
        assert module.startswith("cairn.testing."), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NotAThing"):
        _ = cairn.testing.NotAThing
