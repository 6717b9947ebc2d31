"""The one pattern translator reads the glob tool's dialect and git's, each as before."""

from __future__ import annotations

import re

import pytest

from cairn.tools._patterns import translate


def _matches(pattern: str, path: str, *, git: bool) -> bool:
    return re.fullmatch(translate(pattern, git=git), path, re.DOTALL) is not None


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("*.py", "a.py"),
        ("**/*.py", "a.py"),
        ("**/*.py", "src/deep/a.py"),
        ("a/**/b", "a/b"),
        ("a/**/b", "a/x/y/b"),
        ("src/**", "src/a/b.py"),
        ("?.txt", "a.txt"),
        ("[abc].md", "b.md"),
        ("[!abc].md", "d.md"),
        ("file[1.txt", "file[1.txt"),
        ("a+b(c).txt", "a+b(c).txt"),
    ],
)
def test_both_dialects_agree_on_wildcards_folders_and_classes(pattern: str, path: str) -> None:
    assert _matches(pattern, path, git=False)
    assert _matches(pattern, path, git=True)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [("*.py", "src/a.py"), ("?.txt", "ab.txt"), ("[!abc].md", "b.md"), ("src/**", "srcx/a")],
)
def test_both_dialects_agree_on_what_does_not_match(pattern: str, path: str) -> None:
    assert not _matches(pattern, path, git=False)
    assert not _matches(pattern, path, git=True)


def test_a_backslash_escapes_in_git_and_is_a_plain_character_in_a_glob() -> None:
    assert _matches("a\\*b", "a*b", git=True)
    assert not _matches("a\\*b", "a\\xb", git=True)
    assert _matches("a\\*b", "a\\xb", git=False)


def test_a_trailing_double_star_needs_something_inside_in_git_only() -> None:
    """A permission rule's "src/**" covers the folder itself, asked about as "src/"."""
    assert _matches("src/**", "src/", git=False)
    assert not _matches("src/**", "src/", git=True)
    assert _matches("**", "", git=True)


def test_posix_classes_and_escapes_inside_brackets_are_git_only() -> None:
    assert _matches("[[:digit:]]x", "7x", git=True)
    assert not _matches("[[:digit:]]x", "7x", git=False)
    assert _matches("[\\]]", "]", git=True)


@pytest.mark.parametrize("git", [True, False])
def test_a_class_never_matches_a_slash(git: bool) -> None:
    """Regression (glob dialect): ``[!b]`` matched "/", so a rule ``Edit(lib/src[!_]*)`` also
    covered every file below lib/src/."""
    assert not _matches("a[!b]c", "a/c", git=git)
    assert not _matches("a[/x]c", "a/c", git=git)
    assert _matches("a[/x]c", "axc", git=git)


def test_a_reversed_range_in_a_glob_matches_nothing_instead_of_failing() -> None:
    """Regression: ``[z-a]`` raised re.error, failing a glob call or permission rule holding it."""
    assert not _matches("a[z-b]c", "azc", git=False)
    assert _matches("a[z-bx]c", "axc", git=False)
    assert not _matches("[z-a]", "m", git=False)
    assert _matches("[!z-a]", "m", git=False)


def test_a_reversed_range_in_an_ignore_file_matches_its_first_character_as_git_does() -> None:
    """Regression: a ``.gitignore`` line ``a[z-b]c`` raised re.error in every file tool."""
    assert _matches("a[z-b]c", "azc", git=True)
    assert not _matches("a[z-b]c", "abc", git=True)
