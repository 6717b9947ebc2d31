from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.tools.shell_parse import (
    ShellParseError,
    describe_command,
    is_read_only_command,
    parse_command,
    split_commands,
)

READ_ONLY = [
    "ls",
    "ls -la src",
    "cat README.md",
    "head -n 20 a.py",
    "tail -f log.txt",
    "wc -l *.py",
    "grep -rn 'def main' src",
    "egrep 'a|b' f",
    "fgrep x f",
    "rg -n TODO",
    "rg --glob '*.py' foo",
    "find . -name '*.py' -type f",
    "find src -maxdepth 2 -print",
    "pwd",
    "echo hello",
    'echo "$HOME"',
    "printf '%s\\n' a b",
    "stat a.py",
    "file a.bin",
    "du -sh .",
    "df -h",
    "tree -L 2",
    "sort -u names.txt",
    "sort -k2,2n data",
    "uniq -c",
    "uniq counts.txt",
    "cut -d: -f1 /etc/passwd",
    "tr a-z A-Z",
    "which python",
    "type ls",
    "date",
    "date +%Y-%m-%d",
    "date -d yesterday +%F",
    "whoami",
    "uname -a",
    "basename /a/b.txt",
    "dirname /a/b.txt",
    "realpath .",
    "readlink -f link",
    "diff a.txt b.txt",
    "cmp a b",
    "md5sum a",
    "sha256sum a",
    "env",
    "git status",
    "git status -s",
    "git log --oneline -10",
    "git log -p -- src/app.py",
    "git diff HEAD~1",
    "git diff --stat",
    "git show HEAD:README.md",
    "git rev-parse --show-toplevel",
    "git ls-files",
    "git blame -L 1,10 a.py",
    "git describe --tags",
    "git branch",
    "git branch -a -vv",
    "git branch --show-current",
    "git branch --list 'feat*'",
    "git branch --contains abc123",
    "git tag",
    "git tag -l 'v1.*'",
    "git remote",
    "git remote -v",
    "git remote get-url origin",
    "git config --get user.name",
    "git config --list",
    "git -C sub status",
    "git --no-pager log",
    "cd src && ls",
    "git status && git diff",
    "ls; pwd",
    "ls || echo missing",
    "ls -la | grep py | sort | uniq -c",
    "cat a.txt | head -5",
    "ls 2>&1 | head",
    "ls 2>/dev/null",
    "ls >/dev/null 2>&1",
    "ls &> /dev/null",
    "echo oops >&2",
    "cat < input.txt",
    "grep x <<< 'text'",
    "LC_ALL=C sort file",
    "TZ=UTC date",
    "ls # > not a redirection, a comment",
    "echo '$(not run)' '`nor this`'",
    "echo 'a > b'",
    'echo "a | b"',
    "ls \\\n  -la",
    "ls\npwd",
    "ls &",
]

NOT_READ_ONLY = [
    "",
    "   ",
    "rm -rf build",
    "mv a b",
    "cp a b",
    "touch x",
    "mkdir d",
    "sed -i s/a/b/ f",
    "sed -n 1p f",
    "awk '{print $1}' f",
    "python script.py",
    "npm test",
    "make",
    "tee out.txt",
    "xargs rm",
    "sudo ls",
    "bash -c ls",
    "sh -c 'ls'",
    "./ls",
    "/bin/ls",
    "ls > out.txt",
    "ls >> out.txt",
    "ls >| out.txt",
    "ls &> out.txt",
    "ls &>> out.txt",
    "ls 2> errors.txt",
    "echo x &>2",
    "cat <> file",
    "ls >&out.txt",
    "cat < /dev/tcp/example.com/80",
    "echo $(rm -rf x)",
    'echo "$(rm -rf x)"',
    "echo `rm x`",
    "echo ${x:-$(rm x)}",
    "diff <(ls a) <(ls b)",
    "tee >(cat)",
    "(ls)",
    "ls && (pwd)",
    "{ ls; }",
    "cat <<EOF\nhello\nEOF",
    "cat <<'EOF'\nhello\nEOF",
    "PATH=/tmp ls",
    "LD_PRELOAD=x.so ls",
    "GIT_EXTERNAL_DIFF=evil git diff",
    "FOO=1",
    "echo 'unterminated",
    'echo "unterminated',
    "ls |",
    "ls &&",
    "&& ls",
    "ls && && pwd",
    "ls && rm x",
    "ls; rm x",
    "ls\nrm x",
    "ls | xargs rm",
    "$CMD",
    "$'ls'",
    "l$X",
    "find . -delete",
    "find . -name '*.tmp' -exec rm {} \\;",
    "find . -execdir rm {} +",
    "find . -ok rm {} \\;",
    "find . -fprint out.txt",
    "find . -fls out.txt",
    "find $DIR",
    "find *",
    "sort -o out.txt in.txt",
    "sort --output=out.txt in.txt",
    "sort --out=out.txt in.txt",
    "sort -uo out.txt in.txt",
    "sort --compress-program=sh f",
    "uniq in.txt out.txt",
    "tree -o out.txt",
    "tree -R",
    "file -C -m magic",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "date 010100002020",
    "rg --pre ./script foo",
    "rg --pre=sh foo",
    "env rm -rf x",
    "env -i ls",
    "env FOO=1 ls",
    "git",
    "git push",
    "git commit -m x",
    "git checkout main",
    "git reset --hard",
    "git stash",
    "git clean -fd",
    "git branch new-feature",
    "git branch -d old",
    "git branch -D old",
    "git branch -m a b",
    "git branch --delete old",
    "git branch -u origin/main",
    "git tag v1.0",
    "git tag -a v1 -m msg",
    "git tag -d v1",
    "git remote add origin url",
    "git remote remove origin",
    "git config user.name x",
    "git config --unset user.name",
    "git config --get user.name --add x y",
    "git -c core.pager=evil log",
    "git -c alias.x=!rm x",
    "git --exec-path=/tmp status",
    "git diff --output=patch.txt",
    "git log --output patch.txt",
    "git diff --ext-diff",
    "git log $ARGS",
    "git sta*",
    "time ls",
    "if true; then ls; fi",
    "for f in *; do cat $f; done",
    "ls\r",
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_read_only_commands_are_recognised(command: str) -> None:
    assert is_read_only_command(command) is True


@pytest.mark.parametrize("command", NOT_READ_ONLY)
def test_commands_that_may_write_or_run_code_are_not_read_only(command: str) -> None:
    assert is_read_only_command(command) is False


@given(st.text())
def test_any_text_gives_a_bool_without_raising(command: str) -> None:
    assert isinstance(is_read_only_command(command), bool)
    assert isinstance(describe_command(command), list)


@given(st.text(alphabet="ab $()`'\"\\|&;<>{}#\n*=-2", max_size=40))
def test_shell_syntax_soup_gives_a_bool_without_raising(command: str) -> None:
    assert isinstance(is_read_only_command(command), bool)
    assert split_commands(command) is None or isinstance(split_commands(command), list)


def test_non_string_input_is_not_read_only() -> None:
    not_text: Any = None

    assert is_read_only_command(not_text) is False


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
