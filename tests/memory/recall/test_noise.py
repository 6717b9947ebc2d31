from __future__ import annotations

import pytest

from cairn.memory.recall.noise import (
    DURABLE_MARKERS,
    MAX_RECENT_TOOL_NAMES_FOR_MEMORY,
    USAGE_MARKERS,
    filter_noise,
    is_noise,
    remember_tool_name,
    tool_aliases,
)

from ..memory_helpers import make_doc


def test_alias_is_the_trimmed_lower_cased_name() -> None:
    assert tool_aliases(["  Run_Shell_Command "]) == {"run_shell_command"}


def test_namespaced_name_also_yields_the_part_after_the_last_double_colon() -> None:
    assert tool_aliases(["jira::issues::Search"]) == {"jira::issues::search", "search"}


def test_mcp_name_also_yields_the_tool_part_and_the_last_part() -> None:
    aliases = tool_aliases(["mcp__github__repos__create_issue"])
    assert aliases == {"mcp__github__repos__create_issue", "repos__create_issue", "create_issue"}


def test_mcp_name_with_two_parts_yields_only_itself() -> None:
    assert tool_aliases(["mcp__github"]) == {"mcp__github"}


def test_blank_tool_names_yield_no_alias() -> None:
    assert tool_aliases(["", "   "]) == frozenset()


@pytest.mark.parametrize("marker", USAGE_MARKERS)
def test_each_usage_marker_makes_a_tool_note_noise(marker: str) -> None:
    doc = make_doc("jira", description="jira_search notes", body=f"The {marker} for it.")
    assert is_noise(doc, tool_aliases(["jira_search"]))


@pytest.mark.parametrize("marker", DURABLE_MARKERS)
def test_each_durable_marker_keeps_a_tool_note(marker: str) -> None:
    doc = make_doc("jira", description="jira_search parameter schema", body=f"Note the {marker}.")
    assert not is_noise(doc, tool_aliases(["jira_search"]))


def test_a_usage_note_about_another_tool_is_not_noise() -> None:
    doc = make_doc("jira", description="jira_search parameter schema")
    assert not is_noise(doc, tool_aliases(["read_file"]))


def test_a_tool_mention_without_usage_marker_is_not_noise() -> None:
    doc = make_doc("deploy", body="Deploys go through jira_search approval first.")
    assert not is_noise(doc, tool_aliases(["jira_search"]))


def test_nothing_is_noise_without_recent_tools() -> None:
    doc = make_doc("jira", description="jira_search parameter schema")
    assert not is_noise(doc, tool_aliases([]))


def test_markers_match_in_the_title_description_or_body_case_insensitively() -> None:
    doc = make_doc("x", title="JIRA_SEARCH", description="", body="Tool Schema: query, limit")
    assert is_noise(doc, tool_aliases(["jira_search"]))


def test_an_mcp_alias_matches_a_note_naming_only_the_tool_part() -> None:
    doc = make_doc("issue", body="create_issue field mapping: title -> summary")
    assert is_noise(doc, tool_aliases(["mcp__jira__create_issue"]))


def test_filter_noise_keeps_the_other_documents_in_order() -> None:
    noise = make_doc("noise", body="grep_tool usage reference")
    keep_a = make_doc("a", body="grep_tool gotcha: it skips hidden files; usage reference")
    keep_b = make_doc("b", body="Release on Friday")
    assert filter_noise([keep_a, noise, keep_b], ["grep_tool"]) == [keep_a, keep_b]


def test_remember_tool_name_moves_a_repeated_name_to_the_end() -> None:
    names = ["read_file", "grep", "edit"]
    remember_tool_name(names, " grep ")
    assert names == ["read_file", "edit", "grep"]


def test_remember_tool_name_keeps_the_last_twenty() -> None:
    names: list[str] = []
    for index in range(MAX_RECENT_TOOL_NAMES_FOR_MEMORY + 5):
        remember_tool_name(names, f"tool{index}")
    assert names == [f"tool{i}" for i in range(5, MAX_RECENT_TOOL_NAMES_FOR_MEMORY + 5)]
