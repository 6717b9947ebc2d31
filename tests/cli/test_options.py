"""The fast command-line parser reads what it accepts exactly as the typer app does."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.main import get_command

from cairn.cli.app import app, root_options, serve_options
from cairn.cli.options import (
    ROOT_OPTIONS,
    SERVE_OPTIONS,
    RootOptions,
    ServeOptions,
    misspelt_command,
    parse_fast,
    split_initial_prompt,
    with_bare_prompt,
)

Parsed = RootOptions | ServeOptions | None


def typer_parse(argv: Sequence[str]) -> Parsed:
    """What the typer app would run ``cairn argv`` with; ``None`` for help, errors and other
    commands."""
    group = get_command(app)
    try:
        root = group.make_context("cairn", list(argv))
        rest = [*root._protected_args, *root.args]
        if not rest:
            return root_options(root.params)
        if rest[0] != "serve" or argv[: len(argv) - len(rest)]:
            return None  # another subcommand, or root options before `serve`
        command = group.commands["serve"]  # type: ignore[attr-defined]
        sub = command.make_context("serve", rest[1:], parent=root)
        return serve_options(sub.params)
    except Exception:  # a usage error, --help: typer prints it and exits
        return None


VALUES = ["hi", "", "x y", "-x", "--", "5", "05", "-1", "+3", "٣", "5_0", " 5", "TEXT"]
ROOT_TOKENS = [
    *(name for spec in ROOT_OPTIONS.values() for name in spec.names),
    *("text", "json", "stream-json", "plan", "default", "auto-edit", "yolo"),
    *("--no-yolo", "-h", "--help", "-yc", "-phi", "-p=hi", "--prompt=", "--prompt=x"),
    *("--yolo=1", "--model=m", "--max-session-turns=3", "demo", "memory", "serve"),
    *VALUES,
]
SERVE_TOKENS = [
    *(name for spec in SERVE_OPTIONS.values() for name in spec.names),
    *("--port=0", "--host=::1", "--allow-origin=http://a", "--help", "--token=", "serve"),
    *("0", "4170", "127.0.0.1", "http://x", "/tmp/w", "."),
    *("2.5", "1e3", "inf", ".5", "3.", "--lease-seconds=0.5", "--drain-seconds=nan"),
    *VALUES,
]


@pytest.mark.parametrize(
    "argv",
    [
        ["-p", "hi"],
        ["-p", "fix the bug", "-y"],
        ["--prompt", "hi", "--output-format", "stream-json", "--max-session-turns", "3"],
        ["-p", "hi", "-o", "json", "--approval-mode", "auto-edit", "-m", "gpt"],
        ["-p", "hi", "--resume", "0f0e", "--model=m"],
        ["-c", "-p", "go on"],
        ["--acp"],
        ["--acp", "--model", "m", "--approval-mode", "plan"],
        ["--acp", "--yolo"],
        [],
        ["serve"],
        ["serve", "--port", "0", "--host", "127.0.0.1"],
        ["serve", "--allow-origin", "http://a", "--allow-origin", "http://b", "--token", "t"],
        ["serve", "--max-sessions", "8", "--workspace", "/tmp/w", "--hostname=::1"],
        ["serve", "--database", "postgresql://h/d", "--lease-seconds", "2.5", "--drain-seconds=10"],
    ],
)
def test_common_command_lines_take_the_fast_path_with_typers_reading(argv: list[str]) -> None:
    fast = parse_fast(argv)
    assert fast is not None
    assert fast == typer_parse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["-p"],
        ["-p", "-y"],
        ["-p", "a", "-p", "b"],
        ["-yc"],
        ["--max-session-turns", "x"],
        ["-o", "TEXT"],
        ["memory", "list"],
        ["demo"],
        ["-p", "hi", "serve"],
        ["serve", "--help"],
        ["serve", "--port", "http"],
    ],
)
def test_help_errors_and_other_commands_go_through_typer(argv: list[str]) -> None:
    assert parse_fast(argv, environ={}) is None


def test_the_token_comes_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_SERVER_TOKEN", "from-env")
    for argv in (["serve"], ["serve", "--token", "flag"]):
        assert parse_fast(argv) == typer_parse(argv)
    fast = parse_fast(["serve"])
    assert isinstance(fast, ServeOptions)
    assert fast.token == "from-env"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ROOT_TOKENS), max_size=6))
def test_any_root_command_line_is_read_as_typer_reads_it_or_left_to_typer(
    argv: list[str],
) -> None:
    fast = parse_fast(argv)  # the same environment as typer's
    if fast is not None:
        assert fast == typer_parse(argv)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(SERVE_TOKENS), max_size=6))
def test_any_serve_command_line_is_read_as_typer_reads_it_or_left_to_typer(
    argv: list[str],
) -> None:
    fast = parse_fast(["serve", *argv])
    if fast is not None:
        assert fast == typer_parse(["serve", *argv])


def test_the_fast_path_does_not_import_typer() -> None:
    probe = (
        "import sys\n"
        "from cairn.cli.options import parse_fast\n"
        "import cairn.cli.main\n"
        "parse_fast(['-p', 'hi', '-y']); parse_fast(['serve', '--port', '0'])\n"
        "print('typer' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-p"], ["-p", ""]),
        (["-p", "-o", "json"], ["-p", "", "-o", "json"]),
        (["-y", "--prompt", "--continue"], ["-y", "--prompt", "", "--continue"]),
        (["-p", "--help"], ["-p", "", "--help"]),
        (["-p", "fix it", "-o", "json"], ["-p", "fix it", "-o", "json"]),
        (["-p", "-v is broken"], ["-p", "-v is broken"]),  # not an option: the prompt
        (["--prompt=hi"], ["--prompt=hi"]),
        (["-m", "-p"], ["-m", "-p"]),  # -p is the model's name here
        (["memory", "list", "-p"], ["memory", "list", "-p"]),  # a subcommand reads its own
    ],
)
def test_a_bare_p_gets_an_empty_prompt_so_stdin_is_the_prompt(
    argv: list[str], expected: list[str]
) -> None:
    assert with_bare_prompt(argv) == expected


@pytest.mark.parametrize(
    ("argv", "rest", "words"),
    [
        (["fix the bug"], [], "fix the bug"),
        (["-m", "x", "fix", "the", "bug", "-y"], ["-m", "x", "-y"], "fix the bug"),
        (["--model=x", "hi"], ["--model=x"], "hi"),
        (["memory", "list"], ["memory", "list"], None),  # a command
        (["-p", "hi"], ["-p", "hi"], None),  # no positional word
        (["--resume", "abc"], ["--resume", "abc"], None),  # an option's value is not a prompt
        (["--frobnicate", "hi"], ["--frobnicate"], "hi"),  # typer reports the option
    ],
)
def test_words_after_cairn_that_name_no_command_are_the_first_prompt(
    argv: list[str], rest: list[str], words: str | None
) -> None:
    assert split_initial_prompt(argv, {"memory", "serve", "demo"}) == (rest, words)


@pytest.mark.parametrize(
    ("word", "meant"),
    [("memroy", "memory"), ("trst", "trust"), ("sever", "serve"), ("rewnd", "rewind")],
)
def test_a_word_one_slip_from_a_command_is_taken_for_a_typo(word: str, meant: str) -> None:
    assert misspelt_command(["-y", word, "x"], COMMANDS) == meant


@pytest.mark.parametrize(
    "argv",
    [["fix"], ["review", "it"], ["memroy list"], ["explain"], ["deploy"], ["memory"], ["-p", "x"]],
)
def test_a_prompt_word_is_not_a_typo(argv: list[str]) -> None:
    assert misspelt_command(argv, COMMANDS) is None


COMMANDS = {"memory", "trust", "serve", "rewind", "demo", "mcp"}
