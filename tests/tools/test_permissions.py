from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cairn.config.settings import PermissionsSettings
from cairn.tools.permissions import (
    NON_INTERACTIVE_COMMAND_MESSAGE,
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
        ("Edit(*.md)", "write_file", {"file_path": "README.md"}, "deny"),
        ("Write(*.md)", "edit", {"file_path": "README.md"}, "deny"),
        ("Read(secrets/**)", "grep_search", {"pattern": "x", "path": "secrets"}, "deny"),
        ("Read(secrets/**)", "glob", {"pattern": "*", "path": "secrets/a"}, "deny"),
        ("Read(secrets/**)", "edit", {"file_path": "secrets/a"}, None),
        ("Write(/etc/**)", "write_file", {"file_path": "/etc/hosts"}, "deny"),
        ("Write(config/*.json)", "write_file", {"file_path": "/etc/config/a.json"}, None),
        ("Read(.env)", "read_file", {"file_path": "app/.env"}, "deny"),
        ("Grep(secrets/**)", "grep_search", {"pattern": "x", "path": "secrets"}, "deny"),
        ("LS(secrets/**)", "list_directory", {"path": "secrets/keys"}, "deny"),
        ("Glob", "glob", {"pattern": "*"}, "deny"),
        ("Read(src/**)", "read_file", {}, None),
        ("Edit(lib/src[!_]*)", "edit", {"file_path": "lib/src1.py"}, "deny"),
        ("Edit(lib/src[!_]*)", "edit", {"file_path": "lib/src/main.py"}, None),  # [!_] is no "/"
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
    edit = decide_approval(
        rule=None,
        confirmation="edit",
        approval_mode="default",
        interactive=False,
        tool_name="write_file",
    )

    assert edit == ApprovalDecision("deny", NON_INTERACTIVE_MESSAGE)
    assert "--approval-mode auto-edit or yolo" in NON_INTERACTIVE_MESSAGE
    assert "permissions.allow" in NON_INTERACTIVE_MESSAGE


def test_non_interactive_refusal_of_a_command_does_not_suggest_auto_edit() -> None:
    """Regression: a refused command suggested auto-edit, which asks before commands too."""
    command = decide_approval(
        rule=None,
        confirmation="exec",
        approval_mode="default",
        interactive=False,
        tool_name="run_shell_command",
    )

    assert command == ApprovalDecision("deny", NON_INTERACTIVE_COMMAND_MESSAGE)
    assert "auto-edit" not in NON_INTERACTIVE_COMMAND_MESSAGE
    assert "--yolo" in NON_INTERACTIVE_COMMAND_MESSAGE


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


# Regression (#18): "deny rules are bypassed by spelling" — Bash(rm*) was bypassed by 19 of 30
# spellings. Each spelling must be denied, or need approval when it cannot be resolved.

RM_SPELLINGS = [
    "rm -rf victim",
    "/bin/rm -rf victim",
    "/usr/bin/rm victim",
    "./rm victim",
    "\\rm victim",
    '"rm" victim',
    "'rm' victim",
    "r''m victim",
    "$'\\x72m' victim",
    'bash -c "rm victim"',
    "sh -c 'rm -f victim'",
    "bash -lc 'cd . && rm victim'",
    "env rm victim",
    "env -i PATH=/bin rm victim",
    "command rm victim",
    "exec rm victim",
    "nice -n 1 rm victim",
    "timeout 5 rm victim",
    "nohup rm victim",
    "sudo rm victim",
    "sudo -u root rm victim",
    "echo victim | xargs rm",
    "find . -name victim -delete",
    "find . -name victim -exec rm {} \\;",
    "unlink victim",
    "{ rm victim; }",
    "(rm victim)",
    "if true; then rm victim; fi",
    "true && rm victim",
    "echo $(rm victim)",
    "eval 'rm victim'",
    "bash <<EOF\nrm victim\nEOF",
    "f() { rm victim; }; f",
]
UNRESOLVABLE_RM = [
    "R=rm; $R victim",
    "$(echo rm) victim",
    'eval "$CMD"',
    "echo 'rm victim' | bash",
    "`printf rm` victim",
]


@pytest.mark.parametrize("command", RM_SPELLINGS)
def test_a_deny_rule_stops_every_spelling_of_its_program(command: str) -> None:
    rules = PermissionRules.parse(allow=["Bash"], deny=["Bash(rm*)"])

    found = rules.match("run_shell_command", shell(command), WORKSPACE)

    assert found is not None and found.decision == "deny", command


@pytest.mark.parametrize("command", UNRESOLVABLE_RM)
def test_a_command_a_deny_rule_cannot_see_through_needs_approval(command: str) -> None:
    rules = PermissionRules.parse(allow=["Bash"], deny=["Bash(rm*)"])

    found = rules.match("run_shell_command", shell(command), WORKSPACE)

    assert found is not None
    assert (found.decision, found.strict) == ("ask", "unresolved")


@pytest.mark.parametrize("mode", ["default", "auto-edit", "yolo"])
def test_an_unresolvable_command_is_asked_in_every_mode_and_refused_headless(mode: Any) -> None:
    common = {
        "rule": "ask",
        "confirmation": "exec",
        "approval_mode": mode,
        "tool_name": "run_shell_command",
        "rule_text": "Bash(rm*)",
        "strict": "unresolved",
        "strict_reason": "the program name $R is only known when the command runs",
    }

    assert decide_approval(interactive=True, **common).action == "confirm"
    refused = decide_approval(interactive=False, **common)
    assert refused.action == "deny"
    assert "Bash(rm*)" in refused.message and "$R" in refused.message


def test_without_shell_deny_rules_an_unresolvable_command_is_an_ordinary_command() -> None:
    rules = PermissionRules.parse(deny=["Read(secret/**)"])

    assert rules.match("run_shell_command", shell("$CMD x"), WORKSPACE) is None


def test_a_rule_naming_its_program_by_path_matches_the_program() -> None:
    rules = PermissionRules.parse(deny=["Bash(/usr/bin/curl *)"])

    assert rules.decide("run_shell_command", shell("curl example.com"), WORKSPACE) == "deny"
    assert rules.decide("run_shell_command", shell("env curl x"), WORKSPACE) == "deny"


# The oracle: real bash. A marker program records every run; whatever bash really runs must be
# denied (or, if the command cannot be resolved, need approval).

MARKER = "zapfile"
_PROGRAM_SPELLINGS = [
    MARKER, f'"{MARKER}"', f"'{MARKER}'", f"\\{MARKER}", "zap''file", "$'\\x7a'apfile",
    f"{{bin}}/{MARKER}", f"./bin/{MARKER}",
]  # fmt: skip
_WRAPPERS = [
    "{0}", "env {0}", "env FOO=1 {0}", "command {0}", "nice -n 1 {0}", "timeout 5 {0}",
    "stdbuf -o0 {0}", "setsid -w {0}", "exec {0}", "bash -c '{0}'", 'sh -c "{0}"', "eval '{0}'",
    "echo x | xargs {0}", "find . -maxdepth 0 -exec {0} {{}} \\;", "time {0}",
]  # fmt: skip
_STRUCTURES = [
    "{0}", "true && {0}", "false || {0}", "{0}; true", "{{ {0}; }}", "({0})", "echo $({0})",
    "if true; then {0}; fi", "case a in a) {0};; esac", "g() {{ {0}; }}; g",
    "for i in 1; do {0}; done", "{0} | cat", "true | {0}", "while true; do {0}; break; done",
]  # fmt: skip
_UNRESOLVED_FORMS = [f"R={MARKER}; $R", f"$(echo {MARKER})", f"echo {MARKER} | bash"]


@st.composite
def _marker_commands(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        program = draw(st.sampled_from(_UNRESOLVED_FORMS))
    else:
        program = draw(st.sampled_from(_PROGRAM_SPELLINGS))
    command = program + draw(st.sampled_from(["", " arg", " -rf x"]))
    for _ in range(draw(st.integers(0, 2))):
        wrapper = draw(st.sampled_from(_WRAPPERS))
        if ("'" in command and "'" in wrapper) or ('"' in command and '"' in wrapper):
            continue  # nesting the same quote would need escaping; other draws cover it
        command = wrapper.format(command)
    return draw(st.sampled_from(_STRUCTURES)).format(command)


@pytest.fixture(scope="module")
def marker_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("marker")
    (root / "bin").mkdir()
    script = root / "bin" / MARKER
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> "{root}/ran.log"\n')
    script.chmod(0o755)
    return root


@settings(max_examples=150, deadline=None)
@given(command=_marker_commands())
def test_whatever_bash_really_runs_is_denied_or_needs_approval(
    command: str, marker_sandbox: Path
) -> None:
    """Property (#18): for shell command lines against deny rules, no spelling that bash runs
    as the denied program gets through."""
    command = command.replace("{bin}", str(marker_sandbox / "bin"))
    rules = PermissionRules.parse(allow=["Bash"], deny=[f"Bash({MARKER}*)"])
    found = rules.match("run_shell_command", shell(command), marker_sandbox)
    log = marker_sandbox / "ran.log"
    log.unlink(missing_ok=True)

    env = {**os.environ, "PATH": f"{marker_sandbox / 'bin'}:{os.environ['PATH']}"}
    subprocess.run(
        ["bash", "-c", command], cwd=marker_sandbox, env=env, capture_output=True, timeout=10
    )

    if log.exists():  # bash ran the marker program
        assert found is not None, command
        assert found.decision == "deny" or (found.decision, found.strict) == (
            "ask",
            "unresolved",
        ), command


@given(command=st.text())
def test_rule_matching_never_raises(command: str) -> None:
    rules = PermissionRules.parse(allow=["Bash(git *)"], ask=["Bash(curl*)"], deny=["Bash(rm*)"])

    rules.match("run_shell_command", shell(command), WORKSPACE)


@given(path=st.text(), tool=st.sampled_from(["read_file", "write_file", "edit", "grep_search"]))
@example(path="a\x00b", tool="read_file")
@example(path="~0", tool="read_file")  # found by hypothesis: an unknown user's home
def test_path_rule_matching_never_raises(path: str, tool: str) -> None:
    rules = PermissionRules.parse(allow=["Read(src/**)"], deny=["Read(.env)", "Edit(**/*.lock)"])

    rules.match(tool, {"file_path": path, "path": path, "pattern": "x"}, WORKSPACE)
    rules.path_denial(WORKSPACE / path.replace("\x00", ""), "read", WORKSPACE, tool)
