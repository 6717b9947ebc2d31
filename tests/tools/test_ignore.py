"""The .gitignore matcher agrees with git itself (``git ls-files --ignored``) on real trees."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.tools.ignore import IgnoreRules

_GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def _git_ignored(root: Path) -> set[str]:
    """What git says is ignored in ``root`` (a fresh repository with nothing tracked)."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard"],
        cwd=root,
        env=_GIT_ENV,
        capture_output=True,
        check=True,
    )
    return {p for p in done.stdout.decode().split("\0") if p}


def _ours(root: Path) -> set[str]:
    rules = IgnoreRules(root)
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            relative = (Path(folder) / name).relative_to(root).as_posix()
            if rules.ignored(Path(relative), is_dir=False):
                found.add(relative)
    return found


def _tree(root: Path, files: list[str], ignores: dict[str, str]) -> None:
    subprocess.run(["git", "init", "-q", str(root)], env=_GIT_ENV, check=True)
    for name in files:
        path = root / name
        if path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    for folder, text in ignores.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / ".gitignore").write_text(text)


CASES = [
    ("*.log\n", ["a.log", "src/b.log", "c.txt"]),
    ("/build\n", ["build/x.o", "src/build/y.o", "buildings.txt"]),
    ("build/\n", ["build/x.o", "src/build/y.o", "build.txt"]),
    ("*.log\n!keep.log\n", ["a.log", "keep.log", "src/keep.log"]),
    ("logs/\n!logs/keep.log\n", ["logs/a.log", "logs/keep.log"]),  # no re-include below it
    ("doc/*.txt\n", ["doc/a.txt", "doc/sub/b.txt", "x/doc/c.txt"]),
    ("**/cache\n", ["cache/a", "x/y/cache/b", "cached/c"]),
    ("a/**/b\n", ["a/b", "a/x/b", "a/x/y/b", "c/a/b"]),
    ("out/**\n", ["out/a", "out/b/c", "outer/d"]),
    ("[ab].txt\n[!c]x.md\n", ["a.txt", "b.txt", "c.txt", "cx.md", "dx.md"]),
    ("\\#hash\n\\!bang\ntrail\\ \n", ["#hash", "!bang", "trail ", "trail"]),
    ("# comment\n\n  \n*.tmp   \n", ["a.tmp", "# comment"]),
    ("?.c\nfoo*bar\n", ["a.c", "ab.c", "foobar", "fooXbar", "foo/bar"]),
    ("[[:digit:]]*.dat\n", ["1.dat", "a.dat", "9x.dat"]),
    (".*\n!.gitignore\n", [".env", ".config/x", "visible"]),
    # A reversed range matches its first character only; a "-" after a range is itself.
    ("a[z-b]c\nd[b-a-c]e\n", ["azc", "abc", "dbe", "d-e", "dce", "dae"]),
    ("[[:digit:]-z]x\n", ["1x", "-x", "zx", "yx"]),
]


@pytest.mark.parametrize(("ignore", "files"), CASES)
def test_each_rule_of_the_format_matches_git(tmp_path: Path, ignore: str, files: list[str]) -> None:
    _tree(tmp_path, files, {"": ignore})

    assert _ours(tmp_path) == _git_ignored(tmp_path)


def test_a_deeper_gitignore_overrides_a_higher_one(tmp_path: Path) -> None:
    files = ["a.log", "sub/b.log", "sub/deep/c.log", "sub/keep.txt", "sub/deep/keep.txt"]
    _tree(tmp_path, files, {"": "*.log\n", "sub": "!b.log\n*.txt\n", "sub/deep": "!keep.txt\n"})

    assert _ours(tmp_path) == _git_ignored(tmp_path)


def test_the_repositorys_info_exclude_counts(tmp_path: Path) -> None:
    _tree(tmp_path, ["mine.txt", "theirs.txt"], {})
    (tmp_path / ".git" / "info").mkdir(exist_ok=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("mine.txt\n")

    assert _ours(tmp_path) == _git_ignored(tmp_path) == {"mine.txt"}


def test_cairnignore_adds_to_git_and_can_be_turned_off(tmp_path: Path) -> None:
    _tree(tmp_path, ["secret/key.pem", "src/app.py"], {})
    (tmp_path / ".cairnignore").write_text("secret/\n")

    assert IgnoreRules(tmp_path).ignored(tmp_path / "secret" / "key.pem")
    assert IgnoreRules(tmp_path).cairn_ignored(tmp_path / "secret" / "key.pem")
    assert not IgnoreRules(tmp_path, cairnignore=False).ignored(tmp_path / "secret" / "key.pem")
    assert not IgnoreRules(tmp_path).ignored(tmp_path / "src" / "app.py")


def test_paths_outside_the_root_are_never_ignored(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / ".gitignore").write_text("*\n")

    assert not IgnoreRules(tmp_path / "root").ignored(tmp_path / "elsewhere.txt")


_NAMES = st.sampled_from(["a", "b", "ab", "x.log", "y.txt", ".hid", "dir"])
_PATHS = st.lists(_NAMES, min_size=1, max_size=3).map("/".join)
_PIECES = st.sampled_from(
    [
        *("a", "b", "x", ".log", ".txt", "*", "?", "**", "/", "[ab]", "[!a]", "dir"),
        *("[a-b]", "[b-a]", "[a-b-x]", "[!b-a]", "[a-]"),  # ranges, reversed ones too
    ]
)
_PATTERNS = st.builds(
    lambda neg, body, slash: ("!" if neg else "") + body + ("/" if slash else ""),
    st.booleans(),
    st.lists(_PIECES, min_size=1, max_size=4).map("".join),
    st.booleans(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(_PATHS, min_size=1, max_size=8, unique=True),
    root_patterns=st.lists(_PATTERNS, max_size=5),
    sub_patterns=st.lists(_PATTERNS, max_size=3),
)
def test_any_small_tree_and_patterns_match_git(
    files: list[str], root_patterns: list[str], sub_patterns: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        kept = [f for f in files if not any(f.startswith(other + "/") for other in files)]
        _tree(root, kept, {"": "\n".join(root_patterns) + "\n"})
        if (root / "a").is_dir():
            (root / "a" / ".gitignore").write_text("\n".join(sub_patterns) + "\n")

        assert _ours(root) == _git_ignored(root)
