"""The read-only shell policy: which commands run without asking, and only inside their scope.

Every check runs against a real workspace folder (files, folders, symlinks, git repositories
made by the test); nothing is stubbed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cairn.tools.shell_readonly import (
    MAX_GLOB_MATCHES,
    ShellScope,
    is_read_only_command,
    read_only_refusal,
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
    "cut -d: -f1 data.txt",
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
    "$'ls'",
    "find *",
    "cat src/*.py",
    "ls -d */",
    "git -C src status",
    "git log --format=%H -n 3",
    "git status --porcelain=v2 -uno",
    "git diff --cached --stat",
    "git remote show -n origin",
    "git grep -n TODO",
    "cd src && cat app.py",
    "head -c 100 < data.txt",
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
    "l$X",
    "find . -delete",
    "find . -name '*.tmp' -exec rm {} \\;",
    "find . -execdir rm {} +",
    "find . -ok rm {} \\;",
    "find . -fprint out.txt",
    "find . -fls out.txt",
    "find $DIR",
    "find /*",
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


@pytest.fixture
def scope(tmp_path: Path) -> ShellScope:
    """A workspace with a few files, next to a secret outside it."""
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    (workspace / "a.py").write_text("x = 1\n")
    (workspace / "data.txt").write_text("a:b\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return ShellScope.of(workspace)


@pytest.mark.parametrize("command", READ_ONLY)
def test_read_only_commands_are_recognised(command: str, scope: ShellScope) -> None:
    assert read_only_refusal(command, scope) is None


@pytest.mark.parametrize("command", NOT_READ_ONLY)
def test_commands_that_may_write_or_run_code_are_not_read_only(
    command: str, scope: ShellScope
) -> None:
    assert is_read_only_command(command, scope) is False


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.text())
@example(command=":<\x00")  # found by hypothesis: a NUL byte reached os.stat
@example(command="cat a\x00b")
@example(command="git -C \x00 status")
def test_any_text_gives_a_bool_without_raising(command: str, scope: ShellScope) -> None:
    assert isinstance(is_read_only_command(command, scope), bool)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.text(alphabet="ab $()`'\"\\|&;<>{}#\n*=-2~./", max_size=40))
def test_shell_syntax_soup_gives_a_bool_without_raising(command: str, scope: ShellScope) -> None:
    assert isinstance(is_read_only_command(command, scope), bool)


def test_non_string_input_is_not_read_only(scope: ShellScope) -> None:
    not_text: Any = None

    assert is_read_only_command(not_text, scope) is False


# Regression (#18): "read-only shell commands ignore the workspace and leak secrets".


@pytest.mark.parametrize(
    "command",
    [
        "cat ../outside.txt",
        "cat /etc/passwd",
        "cut -d: -f1 /etc/passwd",
        "cat ~/.ssh/id_rsa",
        "ls /",
        "ls ..",
        "ls ../",
        "find / -name id_rsa",
        "cd .. && cat outside.txt",
        "cd /tmp",
        "cd",
        "cd -",
        "cat < ../outside.txt",
        "grep -r secret ..",
        "head --files0-from=../list",
        "wc -l ../*.txt",
        "cat src/../../outside.txt",
        "ls .*",
        "git -C .. status",
        "git log -- ../outside.txt",
    ],
)
def test_reading_outside_the_workspace_is_not_read_only(command: str, scope: ShellScope) -> None:
    """Regression (#18): `cat` of any path ran unasked in default mode."""
    refusal = read_only_refusal(command, scope)

    assert refusal is not None
    assert any(
        reason in refusal for reason in ("outside the folders", "not known", "only known", "..")
    )


@pytest.mark.parametrize(
    "command", ["echo $OPENAI_API_KEY", 'echo "$HOME"', "echo ${CAIRN_SERVER_TOKEN}", "env",
                "printenv", "printenv OPENAI_API_KEY", "cat $FILE", "ls ~"]
)  # fmt: skip
def test_commands_that_print_the_environment_are_not_read_only(
    command: str, scope: ShellScope
) -> None:
    """Regression (#18): `env` ran unasked and printed OPENAI_API_KEY and CAIRN_SERVER_TOKEN."""
    assert is_read_only_command(command, scope) is False


def test_a_symlink_out_of_the_workspace_is_not_read(tmp_path: Path, scope: ShellScope) -> None:
    """Regression (#18): a path inside the workspace may lead out of it."""
    (scope.cwd / "link.txt").symlink_to(tmp_path / "outside.txt")
    (scope.cwd / "linkdir").symlink_to(tmp_path)

    assert not is_read_only_command("cat link.txt", scope)
    assert not is_read_only_command("ls linkdir/", scope)
    assert not is_read_only_command("grep -r secret linkdir", scope)


def test_a_glob_is_checked_on_what_it_matches(tmp_path: Path, scope: ShellScope) -> None:
    """A glob can match a symlink that leads out; bash expands it, so the check does too."""
    assert is_read_only_command("cat *.txt", scope)

    (scope.cwd / "z.txt").symlink_to(tmp_path / "outside.txt")

    assert not is_read_only_command("cat *.txt", scope)
    assert not is_read_only_command("echo {data,../outside}.txt", scope)


def test_a_glob_matching_too_many_files_is_not_read_only(scope: ShellScope) -> None:
    many = scope.cwd / "many"
    many.mkdir()
    for index in range(MAX_GLOB_MATCHES + 1):
        (many / f"{index}.log").touch()

    assert not is_read_only_command("ls many/*.log", scope)
    assert is_read_only_command("ls many", scope)


def test_cd_inside_the_workspace_keeps_later_commands_checked(scope: ShellScope) -> None:
    assert is_read_only_command("cd src && cat app.py", scope)
    assert not is_read_only_command("cd src && cat ../../outside.txt", scope)


def test_the_memory_agents_may_read_only_their_memory_folders(tmp_path: Path) -> None:
    """Regression (#18): the Extract agent's `cat` read a file outside the memory folders
    that its read_file refuses."""
    workspace, memory = tmp_path / "workspace", tmp_path / "memory"
    workspace.mkdir()
    memory.mkdir()
    (memory / "MEMORY.md").write_text("- [a](a.md)\n")
    (workspace / "notes.txt").write_text("project file\n")
    scope = ShellScope.of(workspace, [memory])

    assert is_read_only_command(f"cat {memory}/MEMORY.md", scope)
    assert is_read_only_command(f"ls {memory}", scope)
    assert not is_read_only_command("cat notes.txt", scope)
    assert not is_read_only_command("ls", scope)
    assert not is_read_only_command("git status", scope)


def test_read_deny_rules_make_a_path_not_read_only(scope: ShellScope) -> None:
    secret = scope.cwd / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("k\n")
    denied = ShellScope.of(scope.cwd, denied=lambda path: secret in (path, *path.parents))

    assert not is_read_only_command("cat secret/key.txt", denied)
    assert not is_read_only_command("ls secret", denied)
    assert is_read_only_command("cat a.py", denied)


def test_a_fifo_named_by_a_read_only_command_does_not_hang_the_check(scope: ShellScope) -> None:
    os.mkfifo(scope.cwd / "pipe")

    assert is_read_only_command("ls -l pipe", scope)


# git: exact options only (#18: abbreviated git options passed the read-only check)


@pytest.mark.parametrize(
    "command",
    [
        "git branch --unset-up",
        "git branch --unset-upstream",
        "git branch --set-upstream-t=other",
        "git branch --set-upstream-to=other",
        "git branch --edit-desc",
        "git branch --delet old",
        "git branch -c new",
        "git tag --delet v1",
        "git diff --ext-dif",
        "git log --outp=patch.txt",
        "git log --out patch.txt",
        "git show --output=x",
        "git diff --no-index a.py /etc/passwd",
        "git log --show-signature",
        "git grep -O x",
        "git grep --open-files-in-pager x",
        "git config --add a.b c",
        "git config --unset-a a.b",
        "git config user.name x",
        "git remote show origin",
        "git remote set-url origin x",
        "git status --ignore-sub=all --porc",
        "git --git-dir=/tmp/x status",
        "git --work-tree=/ status",
        "git -c core.fsmonitor=/bin/sh status",
        "git --config-env=core.pager=X log",
        "git help log",
        "git stash list",
        "git sta",
    ],
)
def test_git_options_must_be_allowed_exactly_as_written(command: str, scope: ShellScope) -> None:
    """Regression (#18): `git branch --unset-up` and `--set-upstream-t=other` passed."""
    assert is_read_only_command(command, scope) is False


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(scope: ShellScope) -> Path:
    """A real git repository as the workspace, with one commit."""
    root = scope.cwd
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    return root


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("diff.evil.textconv", "sh -c 'touch pwned'"),
        ("diff.evil.command", "sh -c 'touch pwned'"),
        ("diff.external", "sh -c 'touch pwned'"),
        ("filter.evil.clean", "sh -c 'touch pwned'"),
        ("filter.evil.process", "sh -c 'touch pwned'"),
        ("include.path", "../elsewhere.gitconfig"),
        ("includeIf.gitdir:/.path", "x"),
        ("core.worktree", "/"),
    ],
)
def test_a_repository_config_that_runs_programs_makes_git_not_read_only(
    repo: Path, scope: ShellScope, key: str, value: str
) -> None:
    """Regression (#18): "read-only" git commands ran programs from the repository's config."""
    assert is_read_only_command("git status", scope)

    git(repo, "config", key, value)

    refusal = read_only_refusal("git status", scope)
    assert refusal is not None and "git config may run programs" in refusal
    assert not is_read_only_command("git log -p", scope)


def test_config_that_git_is_told_to_ignore_keeps_git_read_only(
    repo: Path, scope: ShellScope
) -> None:
    """core.fsmonitor, hooks, the pager and gpg are switched off when git runs unasked
    (cairn.tools.shell_git.neutral_git_env), so they do not make git ask."""
    git(repo, "config", "core.fsmonitor", "sh -c 'touch pwned'")
    git(repo, "config", "core.pager", "sh -c 'touch pwned'")
    git(repo, "config", "log.showSignature", "true")

    assert is_read_only_command("git status && git log -1", scope)


def test_a_submodule_config_is_checked_too(repo: Path, scope: ShellScope) -> None:
    module = repo / ".git" / "modules" / "lib"
    module.mkdir(parents=True)
    (module / "config").write_text('[filter "evil"]\n\tclean = touch pwned\n')

    assert not is_read_only_command("git status", scope)


def test_old_style_sections_and_continued_lines_are_read_as_git_reads_them(
    repo: Path, scope: ShellScope
) -> None:
    config = repo / ".git" / "config"
    original = config.read_text()
    config.write_text(original + "[diff.evil]\n\ttextconv = touch pwned\n")
    assert not is_read_only_command("git status", scope)

    config.write_text(original + '[alias]\n\tx = "!echo \\\n[diff \\"x\\"]"\n')
    assert is_read_only_command("git status", scope)


def test_a_config_file_that_is_a_fifo_is_not_trusted_and_does_not_hang(
    repo: Path, scope: ShellScope
) -> None:
    config = repo / ".git" / "config"
    config.unlink()
    os.mkfifo(config)

    refusal = read_only_refusal("git status", scope)

    assert refusal is not None and "FIFO" in refusal


def test_a_git_file_pointing_elsewhere_is_followed(tmp_path: Path, scope: ShellScope) -> None:
    """Worktrees and submodules have a `.git` file naming the real git folder."""
    real = tmp_path / "real-git"
    real.mkdir()
    (real / "config").write_text('[diff "x"]\n\tcommand = touch pwned\n')
    (scope.cwd / ".git").write_text(f"gitdir: {real}\n")

    assert not is_read_only_command("git diff", scope)


@pytest.mark.parametrize(
    ("filename", "command"),
    [("--output=clobbered", "sort *"), ("-o.txt", "sort *.txt"), ("--files0-from=l", "wc -l *")],
)
def test_a_glob_matching_an_option_like_file_name_is_not_read_only(
    scope: ShellScope, filename: str, command: str
) -> None:
    """A glob expands to file names; one named like an option (a repository can ship
    `--output=x`) would be read by the program as that option: `sort *` would write."""
    (scope.cwd / filename).write_text("x\n")

    refusal = read_only_refusal(command, scope)

    assert refusal is not None and "option" in refusal


async def test_the_option_like_file_name_really_makes_sort_write(scope: ShellScope) -> None:
    """The oracle for the test above: bash and sort do what the check fears."""
    (scope.cwd / "--output=clobbered").write_text("x\n")

    subprocess.run(["bash", "-c", "sort *"], cwd=scope.cwd, capture_output=True, check=False)

    assert (scope.cwd / "clobbered").exists()
