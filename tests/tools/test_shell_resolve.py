"""What a command line runs: programs seen through paths, quoting, wrappers and shell strings."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.tools.shell_resolve import MAX_RESOLVE_DEPTH, resolve


def runs(command: str) -> list[str]:
    return [i.text for i in resolve(command).invocations]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/bin/rm -rf x", "rm -rf x"),
        ("~/bin/rm x", "rm x"),
        ("\\rm x", "rm x"),
        ('"rm" x', "rm x"),
        ("'r'm x", "rm x"),
        ("r''m x", "rm x"),
        ("$'\\x72m' x", "rm x"),
        ("env rm x", "rm x"),
        ("env -i FOO=1 -u BAR rm x", "rm x"),
        ("env -S 'rm -rf' x", "rm -rf x"),
        ("env --split-string='rm -rf' x", "rm -rf x"),
        ("command rm x", "rm x"),
        ("command -p rm x", "rm x"),
        ("builtin cd x", "cd x"),
        ("exec rm x", "rm x"),
        ("nohup rm x", "rm x"),
        ("nice -n 5 rm x", "rm x"),
        ("nice -5 rm x", "rm x"),
        ("ionice -c3 rm x", "rm x"),
        ("timeout 5 rm x", "rm x"),
        ("timeout -s KILL -k 3 5 rm x", "rm x"),
        ("stdbuf -oL rm x", "rm x"),
        ("setsid -f rm x", "rm x"),
        ("sudo rm x", "rm x"),
        ("sudo -u root -E -- rm x", "rm x"),
        ("doas rm x", "rm x"),
        ("su -c 'rm x' root", "rm x"),
        ("runuser -u bob -- rm x", "rm x"),
        ("script -qc 'rm x' /dev/null", "rm x"),
        ("chroot / rm x", "rm x"),
        ("flock /tmp/lock rm x", "rm x"),
        ("flock -c 'rm x' /tmp/lock", "rm x"),
        ("watch rm x", "rm x"),
        ("busybox rm x", "rm x"),
        ("/usr/bin/time -v rm x", "rm x"),
        ("time rm x", "rm x"),
        ("xargs rm", "rm"),
        ("xargs -0 -n1 rm -f", "rm -f"),
        ("xargs -I{} rm {}", "rm {}"),
        ("find . -name '*.o' -exec rm {} \\;", "rm {}"),
        ("find . -execdir rm {} +", "rm {}"),
        ("find build -delete", "rm build"),
        ("unlink x", "rm x"),
        ("bash -c 'rm -rf x'", "rm -rf x"),
        ("sh -ec -- 'rm x'", "rm x"),
        ("bash -lc 'rm x'", "rm x"),
        ("bash -o pipefail -c 'rm x'", "rm x"),
        ("bash -c 'bash -c \"rm x\"'", "rm x"),
        ("eval 'rm x'", "rm x"),
        ("eval rm x", "rm x"),
        ("trap 'rm x' EXIT", "rm x"),
        ("bash <<EOF\nrm x\nEOF", "rm x"),
        ("bash <<< 'rm x'", "rm x"),
        ("uv run rm x", "rm x"),
        ("npm exec -- rm x", "rm x"),
        ("{ rm x; }", "rm x"),
        ("if true; then rm x; fi", "rm x"),
        ("f() { rm x; }", "rm x"),
        ("case a in a) rm x;; esac", "rm x"),
        ("echo $(rm x)", "rm x"),
        ("ls `rm x`", "rm x"),
        ("diff <(rm x) y", "rm x"),
        ("ls && rm x", "rm x"),
        ("find . -exec sh -c 'rm \"$1\"' _ {} \\;", "rm $1"),
        ("strace -f -o trace.log rm x", "rm x"),
        ("ltrace -o log rm x", "rm x"),
        ("valgrind --tool=memcheck rm x", "rm x"),
        ("fakeroot rm x", "rm x"),
        ("unshare -r rm x", "rm x"),
        ("firejail --noprofile rm x", "rm x"),
        ("sg wheel -c 'rm x'", "rm x"),
    ],
)
def test_every_spelling_of_a_program_resolves_to_it(command: str, expected: str) -> None:
    line = resolve(command)

    assert expected in [i.text for i in line.invocations]
    assert line.unresolved == ()


@pytest.mark.parametrize(
    "command",
    [
        "R=rm; $R x",
        "${R} x",
        '"$R" x',
        "$(echo rm) x",
        "`echo rm` x",
        "r* x",
        "{rm,x}",
        'eval "$X"',
        "bash -c \"$CMD\"",
        "echo 'rm x' | bash",
        "cat script | sh",
        "sudo $CMD",
        "env $ARGS",
        "hash -p /bin/rm ls; ls x",
        "shopt -s expand_aliases",
        "enable -f ./lib.so rm",
        "echo 'unterminated",
        "uv run --with x rm",
    ],
)
def test_what_is_only_known_at_run_time_is_unresolved(command: str) -> None:
    assert resolve(command).unresolved


def test_command_v_only_looks_a_program_up() -> None:
    assert runs("command -v rm") == ["command -v rm"]


def test_a_script_file_is_opaque_but_resolved() -> None:
    line = resolve("bash deploy.sh --fast")

    assert runs("bash deploy.sh --fast") == ["bash deploy.sh --fast"]
    assert line.unresolved == ()


def test_wrappers_are_recorded_outermost_first() -> None:
    inner = [i for i in resolve("sudo env nice rm x").invocations if i.program == "rm"]

    assert [i.wrappers for i in inner] == [("sudo", "env", "nice")]


def test_implied_commands_are_marked() -> None:
    (implied,) = [i for i in resolve("find . -delete").invocations if i.implied]

    assert implied.text == "rm ."


def test_programs_lists_each_program_once_in_order() -> None:
    assert resolve("git status && sudo git push; ls").programs == ["git", "sudo", "ls"]


def test_deep_nesting_stops_and_says_so() -> None:
    command = "rm x"
    for _ in range(MAX_RESOLVE_DEPTH + 2):
        command = f"bash -c {shlex.quote(command)}"

    assert "nested too deeply" in " ".join(resolve(command).unresolved)


@given(st.text())
def test_any_text_resolves_without_raising(command: str) -> None:
    line = resolve(command)

    assert all(isinstance(i.program, str) and i.program for i in line.invocations)


@given(st.text(alphabet="ab $()`'\"\\|&;<>{}#\n*=-~/cxe", max_size=60))
def test_shell_syntax_soup_resolves_without_raising(command: str) -> None:
    resolve(command)
