"""Front matter of command, skill and agent files, as other tools' files write it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.config.frontmatter import (
    FrontMatterError,
    field_bool,
    field_list,
    field_text,
    split_front_matter,
)


def test_a_file_without_front_matter_is_all_body() -> None:
    front = split_front_matter("Fix the bug.\n")
    assert front.fields == {}
    assert front.body == "Fix the bug.\n"


def test_yaml_front_matter_and_body_are_split_with_crlf_and_a_bom() -> None:
    text = (
        "\ufeff---\r\ndescription: Commit staged changes\r\n"
        "allowed-tools: [Bash, Read]\r\n---\r\nBody\r\n"
    )
    front = split_front_matter(text)
    assert front.fields == {
        "description": "Commit staged changes",
        "allowed-tools": ["Bash", "Read"],
    }
    assert front.body == "Body\n"


def test_a_colon_in_a_value_is_read_as_text_when_yaml_refuses_it() -> None:
    """Claude Code files often say `description: Review: staged changes`, which YAML refuses."""
    front = split_front_matter("---\ndescription: Review: staged changes only\nmodel: x\n---\nGo")
    assert front.fields == {"description": "Review: staged changes only", "model": "x"}


def test_front_matter_that_is_not_key_value_lines_is_an_error() -> None:
    with pytest.raises(FrontMatterError, match="not valid YAML"):
        split_front_matter("---\ndescription: [unclosed\n  - x: y: z\n---\nbody")


def test_front_matter_never_closed_is_an_error() -> None:
    with pytest.raises(FrontMatterError, match="never closed"):
        split_front_matter("---\ndescription: x\nbody without an end")


def test_front_matter_that_is_a_list_is_an_error() -> None:
    with pytest.raises(FrontMatterError, match="key: value"):
        split_front_matter("---\n- a\n- b\n---\nbody")


def test_lists_are_read_from_yaml_lists_commas_or_spaces_keeping_parentheses_together() -> None:
    assert field_list({"t": ["Read", "Grep"]}, "t") == ("Read", "Grep")
    assert field_list({"t": "Read, Grep"}, "t") == ("Read", "Grep")
    assert field_list({"t": "Bash(git add *) Bash(git commit *) Read"}, "t") == (
        "Bash(git add *)",
        "Bash(git commit *)",
        "Read",
    )
    assert field_list({}, "t") is None
    with pytest.raises(FrontMatterError):
        field_list({"t": {"a": 1}}, "t")


def test_text_and_yes_no_fields() -> None:
    assert field_text({"model": 4.1}, "model") == "4.1"
    assert field_text({}, "model") is None
    with pytest.raises(FrontMatterError, match="must be text"):
        field_text({"description": ["a"]}, "description")
    assert field_bool({"x": "yes"}, "x", False) is True
    assert field_bool({"x": "Off"}, "x", True) is False
    assert field_bool({}, "x", True) is True
    with pytest.raises(FrontMatterError, match="true or false"):
        field_bool({"x": "maybe"}, "x", False)


@given(st.text())
def test_any_text_splits_or_raises_front_matter_error(text: str) -> None:
    try:
        front = split_front_matter(text)
    except FrontMatterError:
        return
    assert isinstance(front.body, str)
