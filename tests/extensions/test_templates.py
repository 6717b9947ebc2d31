"""Filling a command or skill body with its arguments, in each tool's own syntax."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cairn.extensions.templates import ShellStep, expand_template


def test_claude_command_placeholders_take_the_whole_line_and_each_argument() -> None:
    body = "Review PR #$1 with priority $2 and assign to $3.\nAll: $ARGUMENTS; first: $ARGUMENTS[0]"
    done = expand_template(body, '456 "very high" alice', dialect="command")
    assert done.text() == (
        "Review PR #456 with priority very high and assign to alice.\n"
        'All: 456 "very high" alice; first: 456'
    )


def test_a_missing_argument_is_empty_and_an_escaped_placeholder_is_kept() -> None:
    done = expand_template(r"Costs \$1.00, owner $2.", "x", dialect="command")
    assert done.text() == "Costs $1.00, owner ."


def test_arguments_a_body_does_not_use_are_added_at_its_end() -> None:
    done = expand_template("Summarise the diff.", "focus on tests", dialect="command")
    assert done.text() == "Summarise the diff.\n\nARGUMENTS: focus on tests"
    assert expand_template("Summarise.", "", dialect="command").text() == "Summarise."


def test_qwen_args_work_in_claude_format_files_too() -> None:
    assert expand_template("Fix {{args}}", "#12", dialect="command").text() == "Fix #12"


def test_inline_and_fenced_shell_steps_are_cut_out_with_arguments_quoted() -> None:
    body = "Diff:\n!`git diff $1`\n```!\ngit status\nls $ARGUMENTS\n```\nKEY=!`not a step`"
    done = expand_template(body, "main; rm -rf /", dialect="command")
    assert done.steps == [
        ShellStep("git diff 'main;'"),
        ShellStep("git status\nls 'main; rm -rf /'"),
    ]
    assert done.text(["D", "S"]) == "Diff:\nD\nS\nKEY=!`not a step`"


def test_skills_count_arguments_from_zero_and_know_their_named_arguments() -> None:
    body = "Migrate $0 from $1 to $2 ($component). Dir: ${CLAUDE_SKILL_DIR}"
    done = expand_template(
        body,
        "SearchBar React Vue",
        dialect="skill",
        argument_names=["component"],
        variables={"CLAUDE_SKILL_DIR": "/skills/migrate"},
    )
    assert done.text() == "Migrate SearchBar from React to Vue (SearchBar). Dir: /skills/migrate"


def test_qwen_syntax_quotes_args_inside_shell_steps_and_turns_file_blocks_into_mentions() -> None:
    body = "Find {{args}}:\n!{grep -rn {{args}} src}\nUse @{docs/style guide.md}."
    done = expand_template(body, "foo; rm -rf ~", dialect="qwen", invocation="/find foo; rm -rf ~")
    assert done.steps == [ShellStep("grep -rn 'foo; rm -rf ~' src")]
    assert done.text(["out"]) == r"Find foo; rm -rf ~:" + "\nout\nUse  @docs/style\\ guide.md ."


def test_a_qwen_file_without_args_gets_the_command_line_at_its_end() -> None:
    done = expand_template(
        "Explain the code.", "slowly", dialect="qwen", invocation="/explain slowly"
    )
    assert done.text() == "Explain the code.\n\n/explain slowly"


def test_qwen_syntax_keeps_claude_placeholders_as_written() -> None:
    done = expand_template("Echo $1 and $ARGUMENTS", "x", dialect="qwen", invocation="/e x")
    assert done.text() == "Echo $1 and $ARGUMENTS\n\n/e x"


def test_variables_are_replaced_and_unknown_ones_kept() -> None:
    done = expand_template(
        "In ${CLAUDE_PROJECT_DIR} (${CLAUDE_SESSION_ID})",
        "",
        dialect="command",
        variables={"CLAUDE_PROJECT_DIR": "/p"},
    )
    assert done.text() == "In /p (${CLAUDE_SESSION_ID})"


@given(st.text(), st.text(), st.sampled_from(["command", "skill", "qwen"]))
def test_any_body_and_arguments_expand_without_raising(body: str, args: str, dialect: str) -> None:
    done = expand_template(body, args, dialect=dialect, invocation="/x " + args)  # type: ignore[arg-type]
    assert isinstance(done.text(["out"] * len(done.steps)), str)
