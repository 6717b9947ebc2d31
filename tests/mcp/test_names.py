"""Tool names: mcp__<server>__<tool>, sanitised, at most 64 characters, deterministic."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from cairn.mcp.names import MAX_NAME_LENGTH, NameAllocator, qualified_name, server_of

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_a_plain_name_is_prefixed_with_the_server() -> None:
    assert qualified_name("github", "get_issue") == "mcp__github__get_issue"
    assert server_of("mcp__github__get_issue") == "github"


def test_characters_providers_refuse_become_underscores() -> None:
    assert qualified_name("my server", "files.read/v2") == "mcp__my_server__files_read_v2"


def test_a_long_name_is_cut_to_64_characters_with_a_stable_hash() -> None:
    name = qualified_name("server", "t" * 100)
    assert len(name) == MAX_NAME_LENGTH
    assert name == qualified_name("server", "t" * 100)
    assert name != qualified_name("server", "t" * 99)


def test_colliding_names_are_told_apart_the_same_way_every_time() -> None:
    first = NameAllocator(["mcp__a__b"])
    second = NameAllocator(["mcp__a__b"])
    assert first.allocate("a", "b") == second.allocate("a", "b") != "mcp__a__b"
    names = NameAllocator()
    assert names.allocate("a.b", "c") == "mcp__a_b__c"
    assert names.allocate("a b", "c") not in ("mcp__a_b__c", "")


@given(st.text(), st.text())
def test_any_server_and_tool_give_a_valid_function_name(server: str, tool: str) -> None:
    assert VALID.match(NameAllocator(["mcp__x__y"]).allocate(server, tool))
