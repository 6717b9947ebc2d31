"""The one set of answers to an approval, shared by the terminal UI, ACP and the daemon."""

from __future__ import annotations

from cairn.values import replace
from cairn.vocabulary import (
    PERMISSION_OPTION_IDS,
    PermissionRequest,
    ToolKind,
    outcome_of_option,
    permission_choices,
)


def request(tool: str) -> PermissionRequest:
    return PermissionRequest("c1", tool, "title", ToolKind.EXECUTE, "exec", {"command": "ls"})


def test_every_approval_offers_allow_once_allow_always_and_reject() -> None:
    choices = permission_choices(request("edit"))

    assert [(c.id, c.label, c.kind, c.outcome) for c in choices] == [
        ("allow_once", "Allow once", "allow_once", "allow_once"),
        ("allow_always", "Allow always (this session)", "allow_always", "allow_always"),
        ("reject_once", "Reject", "reject_once", "reject"),
    ]


def test_a_shell_approval_names_the_programs_always_allowing_it_would_allow() -> None:
    """Issue #30: "Allow always for these programs" did not say which."""
    shell = replace(request("run_shell_command"), programs=("make", "npm"))
    [_, always, _] = permission_choices(shell)

    assert always.label == "Allow always for make, npm (this session)"


def test_an_option_id_names_its_outcome_and_anything_else_names_none() -> None:
    assert [outcome_of_option(i) for i in PERMISSION_OPTION_IDS] == [
        "allow_once",
        "allow_always",
        "reject",
    ]
    assert outcome_of_option("reject") is None
    assert outcome_of_option("") is None
