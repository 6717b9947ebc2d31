from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.tools._walk import MAX_BRACE_EXPANSIONS, GlobPattern, expand_braces, iter_files


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "src/deep/a.py", True),
        ("src/**", "src/a/b.py", True),
        ("src/**", "srcx/a.py", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("?.txt", "a.txt", True),
        ("?.txt", "ab.txt", False),
        ("[abc].md", "b.md", True),
        ("[!abc].md", "b.md", False),
        ("*.{ts,tsx}", "x.tsx", True),
        ("*.{ts,tsx}", "x.js", False),
        ("./src/*.py", "src/a.py", True),
        ("file[1.txt", "file[1.txt", True),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_glob_pattern_matching(pattern: str, path: str, expected: bool) -> None:
    assert GlobPattern.compile(pattern).matches(path) is expected


def test_anywhere_patterns_without_a_slash_match_the_file_name_at_any_depth() -> None:
    pattern = GlobPattern.compile("*.md", anywhere=True)

    assert pattern.matches("docs/guide/intro.md")
    assert not GlobPattern.compile("docs/*.md", anywhere=True).matches("x/docs/a.md")


def test_brace_expansion_nests_and_multiplies() -> None:
    assert expand_braces("{a,b}{c,{d,e}}") == ["ac", "ad", "ae", "bc", "bd", "be"]
    assert expand_braces("{single}") == ["{single}"]


def test_brace_expansion_is_capped() -> None:
    assert len(expand_braces("{a,b}" * 20)) == MAX_BRACE_EXPANSIONS


@given(st.text(max_size=40), st.text(max_size=40))
def test_any_pattern_compiles_and_matches_without_raising(pattern: str, path: str) -> None:
    assert isinstance(GlobPattern.compile(pattern, anywhere=True).matches(path), bool)


def test_iter_files_walks_in_path_order_skipping_ignored_folders(tmp_path: Path) -> None:
    for relative in ("b.txt", "a/z.txt", "a/b/c.txt", ".git/HEAD", "node_modules/x.js", "c.txt"):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    found = [p.relative_to(tmp_path).as_posix() for p in iter_files(tmp_path)]

    assert found == ["a/b/c.txt", "a/z.txt", "b.txt", "c.txt"]


def test_iter_files_does_not_follow_symlinked_folders(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path)

    found = [p.relative_to(tmp_path).as_posix() for p in iter_files(tmp_path)]

    assert found == ["real/f.txt"]


def test_iter_files_stops_when_asked(tmp_path: Path) -> None:
    for n in range(5):
        (tmp_path / f"{n}.txt").write_text("")

    assert list(iter_files(tmp_path, should_stop=lambda: True)) == []
