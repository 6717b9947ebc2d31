"""The shell parser: words, operators, redirections, substitutions and compound commands."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.tools.shell_parse import (
    ShellParseError,
    describe_command,
    parse_command,
    split_commands,
)


@given(st.text())
def test_any_text_parses_or_raises_a_parse_error(command: str) -> None:
    with contextlib.suppress(ShellParseError):
        parse_command(command)
    assert isinstance(describe_command(command), list)


@given(st.text(alphabet="ab $()`'\"\\|&;<>{}#\n*=-2~", max_size=40))
def test_shell_syntax_soup_parses_or_raises_a_parse_error(command: str) -> None:
    assert split_commands(command) is None or isinstance(split_commands(command), list)


def test_non_string_input_is_a_parse_error() -> None:
    not_text: Any = None

    with pytest.raises(ShellParseError):
        parse_command(not_text)


def test_parse_splits_on_list_and_pipe_operators() -> None:
    parsed = parse_command("a 1 && b | c; d || e\nf & g |& h")

    assert [c.program for c in parsed.commands] == ["a", "b", "c", "d", "e", "f", "g", "h"]


def test_parse_removes_quotes_and_keeps_the_raw_text() -> None:
    (command,) = parse_command("""grep -e 'a b' "c$HOME" d\\ e""").commands

    assert [w.value for w in command.words] == ["grep", "-e", "a b", "c$HOME", "d e"]
    assert command.text == """grep -e 'a b' "c$HOME" d\\ e"""
    assert [w.expands for w in command.words] == [False, False, False, True, False]


def test_parse_reads_redirections_with_descriptor_prefixes() -> None:
    (command,) = parse_command("make 2>&1 >out.log").commands

    assert [(r.fd, r.op, r.target.value) for r in command.redirections] == [
        ("2", ">&", "1"),
        ("", ">", "out.log"),
    ]
    assert [w.value for w in command.words] == ["make"]


def test_parse_separates_leading_assignments_from_the_program() -> None:
    (command,) = parse_command("A=1 B='x y' run A=2").commands

    assert [a.raw for a in command.assignments] == ["A=1", "B='x y'"]
    assert [w.value for w in command.words] == ["run", "A=2"]


def test_parse_collects_substitution_bodies() -> None:
    parsed = parse_command("echo $(git rev-parse HEAD) `date` <(ls)")

    assert parsed.substitutions == ("git rev-parse HEAD", "date", "ls")


def test_heredoc_body_is_not_parsed_as_commands() -> None:
    parsed = parse_command("cat <<EOF > out.txt\nrm -rf /\ndon't\nEOF\nls")

    assert parsed.heredoc
    assert [c.program for c in parsed.commands] == ["cat", "ls"]


def test_unquoted_heredoc_body_substitutions_are_collected() -> None:
    parsed = parse_command("cat <<EOF\n$(rm -rf x)\nEOF")

    assert parsed.substitutions == ("rm -rf x",)


@pytest.mark.parametrize(
    "command", ["echo 'a", 'echo "a', "echo $(ls", "echo `ls", "ls &&", "ls | | wc", "cat <"]
)
def test_unparseable_commands_raise_a_parse_error(command: str) -> None:
    with pytest.raises(ShellParseError):
        parse_command(command)


def test_split_commands_includes_commands_inside_substitutions() -> None:
    commands = split_commands("echo $(git status; rm -rf x) && ls")

    assert commands is not None
    assert [c.text for c in commands] == [
        "echo $(git status; rm -rf x)",
        "ls",
        "git status",
        "rm -rf x",
    ]


def test_split_commands_is_none_for_unparseable_input() -> None:
    assert split_commands("echo 'open") is None


def test_describe_command_lists_every_program_in_order() -> None:
    assert describe_command("FOO=1 git status && npm test | tee log; echo $(date)") == [
        "git",
        "npm",
        "tee",
        "echo",
        "date",
    ]


def test_describe_command_of_unparseable_input_is_empty() -> None:
    assert describe_command("echo 'open") == []


# Compound commands: every simple command inside is found, with its real program first.


@pytest.mark.parametrize(
    ("command", "commands"),
    [
        ("if true; then rm x; fi", ["true", "rm x"]),
        ("if a; then b; elif c; then d; else e; fi", ["a", "b", "c", "d", "e"]),
        ("while read l; do rm \"$l\"; done < list", ["read l", 'rm "$l"', "<list"]),
        ("until false; do ls; done", ["false", "ls"]),
        ("for f in a b; do cat $f; done", ["cat $f"]),
        ("{ rm x; }", ["rm x"]),
        ("! rm x", ["rm x"]),
        ("time -p rm x", ["rm x"]),
        ("f() { rm -rf x; }; f", ["rm -rf x", "f"]),
        ("function g { rm z; }", ["rm z"]),
        ("case $x in a|b) rm y;; c) ls;& d) pwd;;& esac", ["rm y", "ls", "pwd"]),
        ("case x in (a) rm y ;; esac; ls", ["rm y", "ls"]),
        ("echo if then fi", ["echo if then fi"]),
        ('"if" x', ['"if" x']),
    ],
)
def test_compound_commands_are_seen_through(command: str, commands: list[str]) -> None:
    parsed = parse_command(command)

    assert [c.text for c in parsed.commands] == commands


def test_compound_commands_are_marked() -> None:
    assert parse_command("if a; then b; fi").compound
    assert parse_command("{ a; }").compound
    assert not parse_command("a && b").compound


def test_ansi_c_quoting_is_decoded_as_bash_does() -> None:
    (command,) = parse_command(r"$'\x72\155' $'a\tb' $'\u00e9' $'\cA' $'it\'s'").commands

    assert [w.value for w in command.words] == ["rm", "a\tb", "\u00e9", "\x01", "it's"]
    assert all(w.literal for w in command.words)


def test_tilde_words_are_not_literal() -> None:
    (command,) = parse_command("cat ~/.ssh/id_rsa '~/x' a~b").commands

    assert [w.tilde for w in command.words] == [False, True, False, False]
    assert not command.words[1].literal


def test_braces_are_a_glob_only_when_bash_expands_them() -> None:
    (command,) = parse_command("echo {a,b} {1..3} {} x{y}z").commands

    assert [w.glob for w in command.words] == [False, True, True, False, False]


def test_heredoc_bodies_are_kept_in_order() -> None:
    parsed = parse_command("cat <<A; cat <<'B'\none\nA\ntwo\nB\n")

    assert parsed.heredoc_bodies == ("one", "two")
