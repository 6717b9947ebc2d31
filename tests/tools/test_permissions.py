from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import PermissionsSettings
from cairn.tools.permissions import (
    NON_INTERACTIVE_MESSAGE,
    PLAN_MODE_MESSAGE,
    ApprovalDecision,
    PermissionRule,
    PermissionRules,
    decide_approval,
)

WORKSPACE = Path("/work/project")


def shell(command: str) -> dict[str, Any]:
    return {"command": command}


# Rule syntax


@pytest.mark.parametrize(
    ("text", "tool", "specifier"),
    [
        ("Bash", "run_shell_command", None),
        ("Shell(git *)", "run_shell_command", "git *"),
        ("Read(src/**)", "read_file", "src/**"),
        ("Write(*.md)", "write_file", "*.md"),
        ("Edit", "edit", None),
        ("Glob", "glob", None),
        ("Grep( src/** )", "grep_search", "src/**"),
        ("LS", "list_directory", None),
        ("read_file(docs/*)", "read_file", "docs/*"),
        ("mcp__server__tool", "mcp__server__tool", None),
        ("Bash(echo (nested))", "run_shell_command", "echo (nested)"),
    ],
)
def test_rules_parse_aliases_and_specifiers(text: str, tool: str, specifier: str | None) -> None:
    assert PermissionRule.parse(text) == PermissionRule(text, tool, specifier)


def test_malformed_rules_become_warnings_and_the_rest_still_apply() -> None:
    rules = PermissionRules.parse(allow=["Bash(git *)", "Bash(", "", "Read()", 42, "two words"])

    assert [r.text for r in rules.allow] == ["Bash(git *)"]
    assert len(rules.warnings) == 5
    assert rules.warnings[0].startswith("permissions.allow[1] 'Bash(':")
    assert "the specifier in parentheses is empty" in rules.warnings[2]
    assert "a rule must be a string" in rules.warnings[3]


def test_rules_load_from_the_settings_section() -> None:
    settings = PermissionsSettings(allow=["Read"], ask=["Edit(*.md)"], deny=["Bash(rm *)"])

    rules = PermissionRules.from_settings(settings)

    assert rules.decide("read_file", {"file_path": "a.py"}, WORKSPACE) == "allow"
    assert rules.decide("edit", {"file_path": "README.md"}, WORKSPACE) == "ask"
    assert rules.decide("run_shell_command", shell("rm -rf x"), WORKSPACE) == "deny"
    assert rules.warnings == ()


# Shell rules


@pytest.mark.parametrize(
    ("rule", "command", "expected"),
    [
        ("Bash(git *)", "git status -s", "allow"),
        ("Bash(git *)", "git", "allow"),
        ("Bash(git *)", "gitk", None),
        ("Bash(git status)", "git status", "allow"),
        ("Bash(git status)", "git status -s", None),
        ("Bash(npm run test:*)", "npm run test", "allow"),
        ("Bash(npm run test:*)", "npm run test -- --watch", "allow"),
        ("Bash(npm run test:*)", "npm run testing", None),
        ("Bash", "anything at all", "allow"),
        ("Bash(*)", "anything at all", "allow"),
        ("Bash(git *)", "git status && git diff", "allow"),
        ("Bash(git *)", "git status && rm -rf x", None),
        ("Bash(git *)", "git log $(rm -rf x)", None),
        ("Bash(git *)", "git status; echo 'open", None),
        ("Bash(make *)", "cd src && make test", "allow"),
        ("Bash(make *)", "FOO=1 make", None),
    ],
)
def test_shell_allow_rules_must_cover_every_part(
    rule: str, command: str, expected: str | None
) -> None:
    rules = PermissionRules.parse(allow=[rule])

    assert rules.decide("run_shell_command", shell(command), WORKSPACE) == expected


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "git status && rm -rf build",
        "ls; rm x",
        "echo $(rm -rf x)",
        "FOO=1 rm -rf x",
        "rm -rf x 2>/dev/null",
        "ls\nrm -rf x\necho 'unbalanced",
    ],
)
def test_shell_deny_rules_match_any_part(command: str) -> None:
    rules = PermissionRules.parse(allow=["Bash"], deny=["Bash(rm *)"])

    assert rules.decide("run_shell_command", shell(command), WORKSPACE) == "deny"


def test_deny_beats_ask_and_ask_beats_allow() -> None:
    rules = PermissionRules.parse(
        allow=["Bash(git *)"], ask=["Bash(git push*)"], deny=["Bash(git push --force*)"]
    )

    assert rules.decide("run_shell_command", shell("git status"), WORKSPACE) == "allow"
    assert rules.decide("run_shell_command", shell("git push origin"), WORKSPACE) == "ask"
    assert rules.decide("run_shell_command", shell("git push --force"), WORKSPACE) == "deny"


def test_match_names_the_deciding_rule() -> None:
    rules = PermissionRules.parse(allow=["Bash"], deny=["Bash(curl *)"])

    found = rules.match("run_shell_command", shell("curl example.com"), WORKSPACE)

    assert found is not None
    assert (found.decision, found.rule.text) == ("deny", "Bash(curl *)")


def test_shell_rule_does_not_apply_to_other_tools() -> None:
    rules = PermissionRules.parse(deny=["Bash"])

    assert rules.decide("read_file", {"file_path": "a"}, WORKSPACE) is None


def test_missing_command_matches_only_rules_without_a_specifier() -> None:
    rules = PermissionRules.parse(ask=["Bash(git *)"], deny=["Edit"])

    assert rules.decide("run_shell_command", {}, WORKSPACE) is None


# Path rules


@pytest.mark.parametrize(
    ("rule", "tool", "args", "expected"),
    [
        ("Read(src/**)", "read_file", {"file_path": "src/a/b.py"}, "deny"),
        ("Read(src/**)", "read_file", {"file_path": "/work/project/src/a.py"}, "deny"),
        ("Read(src/**)", "read_file", {"file_path": "tests/a.py"}, None),
        ("Read(src/**)", "read_file", {"file_path": "./src/../src/x.py"}, "deny"),
        ("Edit(*.md)", "edit", {"file_path": "README.md"}, "deny"),
        ("Edit(*.md)", "edit", {"file_path": "docs/guide.md"}, "deny"),
        ("Edit(*.md)", "write_file", {"file_path": "README.md"}, None),
        ("Write(/etc/**)", "write_file", {"file_path": "/etc/hosts"}, "deny"),
        ("Write(config/*.json)", "write_file", {"file_path": "/etc/config/a.json"}, None),
        ("Read(.env)", "read_file", {"file_path": "app/.env"}, "deny"),
        ("Grep(secrets/**)", "grep_search", {"pattern": "x", "path": "secrets"}, "deny"),
        ("LS(secrets/**)", "list_directory", {"path": "secrets/keys"}, "deny"),
        ("Glob", "glob", {"pattern": "*"}, "deny"),
        ("Read(src/**)", "read_file", {}, None),
    ],
)
def test_path_rules_match_the_workspace_relative_path(
    rule: str, tool: str, args: dict[str, Any], expected: str | None
) -> None:
    rules = PermissionRules.parse(deny=[rule])

    assert rules.decide(tool, args, WORKSPACE) == expected


def test_specifier_rules_never_match_tools_without_a_path_or_command() -> None:
    rules = PermissionRules.parse(deny=["todo_write(anything)"], ask=["todo_write"])

    assert rules.decide("todo_write", {"todos": []}, WORKSPACE) == "ask"


# The approval decision


@pytest.mark.parametrize(
    ("rule", "confirmation", "mode", "interactive", "tool", "expected"),
    [
        # a deny rule wins everywhere
        ("deny", None, "yolo", True, "read_file", "deny"),
        ("deny", "exec", "default", True, "run_shell_command", "deny"),
        # an allow rule runs without asking, plan mode included
        ("allow", "exec", "default", False, "run_shell_command", "run"),
        ("allow", "edit", "plan", True, "edit", "run"),
        # nothing to confirm: run
        (None, None, "default", False, "read_file", "run"),
        (None, None, "plan", True, "grep_search", "run"),
        # an ask rule needs confirmation even for a safe tool
        ("ask", None, "default", True, "read_file", "confirm"),
        ("ask", None, "default", False, "read_file", "deny"),
        ("ask", None, "yolo", False, "read_file", "run"),
        # needs confirmation: yolo runs
        (None, "exec", "yolo", False, "run_shell_command", "run"),
        (None, "edit", "yolo", True, "edit", "run"),
        # plan refuses
        (None, "edit", "plan", True, "edit", "deny"),
        (None, "exec", "plan", False, "run_shell_command", "deny"),
        # auto-edit runs edits only
        (None, "edit", "auto-edit", False, "write_file", "run"),
        (None, "exec", "auto-edit", True, "run_shell_command", "confirm"),
        (None, "info", "auto-edit", True, "web_fetch", "confirm"),
        (None, "exec", "auto-edit", False, "run_shell_command", "deny"),
        # default: ask when someone can answer, refuse otherwise
        (None, "edit", "default", True, "edit", "confirm"),
        (None, "exec", "default", True, "run_shell_command", "confirm"),
        (None, "edit", "default", False, "edit", "deny"),
        # ask_user_question is its own interaction
        (None, "info", "plan", False, "ask_user_question", "run"),
        ("ask", "info", "default", False, "ask_user_question", "run"),
        # ... but an explicit deny rule still refuses it
        ("deny", None, "default", True, "ask_user_question", "deny"),
    ],
)
def test_approval_decision_table(
    rule: Any, confirmation: Any, mode: Any, interactive: bool, tool: str, expected: str
) -> None:
    decision = decide_approval(
        rule=rule,
        confirmation=confirmation,
        approval_mode=mode,
        interactive=interactive,
        tool_name=tool,
    )

    assert decision.action == expected
    assert bool(decision.message) == (expected == "deny")


def test_plan_mode_refusal_tells_the_model_to_present_its_plan() -> None:
    decision = decide_approval(
        rule=None, confirmation="edit", approval_mode="plan", interactive=True, tool_name="edit"
    )

    assert decision == ApprovalDecision("deny", PLAN_MODE_MESSAGE)
    assert PLAN_MODE_MESSAGE == (
        "Plan mode is active: this call would change files or run commands. "
        "Present your plan instead."
    )


def test_non_interactive_refusal_says_how_to_allow_the_call() -> None:
    decision = decide_approval(
        rule=None,
        confirmation="exec",
        approval_mode="default",
        interactive=False,
        tool_name="run_shell_command",
    )

    assert decision == ApprovalDecision("deny", NON_INTERACTIVE_MESSAGE)
    assert "--approval-mode auto-edit or yolo" in NON_INTERACTIVE_MESSAGE
    assert "permissions.allow" in NON_INTERACTIVE_MESSAGE


def test_deny_message_names_the_rule_when_given() -> None:
    decision = decide_approval(
        rule="deny",
        confirmation="exec",
        approval_mode="yolo",
        interactive=True,
        tool_name="run_shell_command",
        rule_text="Bash(rm *)",
    )

    assert decision.message == (
        "Permission denied: this run_shell_command call matches the permissions.deny rule "
        '"Bash(rm *)".'
    )


def test_deny_message_without_the_rule_text_names_the_setting() -> None:
    decision = decide_approval(
        rule="deny", confirmation=None, approval_mode="default", interactive=True, tool_name="edit"
    )

    assert "permissions.deny" in decision.message
