"""Evidence files: hashed as git does, read without ever leaving the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.memory.trust.evidence import (
    Unverifiable,
    git_blob_hash,
    read_state,
    tracked_paths,
    workspace_relative,
)

from ...git_helpers import git, make_repository


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repository(
        tmp_path / "repo", {"Makefile": "check:\n\tpytest\n", "src/app.py": "x = 1\n"}
    )


def test_the_git_hash_is_the_blob_hash_git_gives_the_file(repo: Path) -> None:
    state = read_state(repo, "src/app.py")
    assert state.git == git(repo, "hash-object", "--no-filters", "src/app.py").strip()
    assert state.git == git_blob_hash(b"x = 1\n")
    assert state.size == 6 and len(state.sha256) == 64


def test_git_says_which_files_it_tracks(repo: Path) -> None:
    (repo / "notes.txt").write_text("untracked\n")
    assert tracked_paths(repo, ["Makefile", "notes.txt", "missing"]) == {"Makefile"}
    assert tracked_paths(repo.parent, ["repo/Makefile"]) == set()  # not a repository


@pytest.mark.parametrize(
    ("raw", "relative"),
    [
        ("Makefile", "Makefile"),
        ("./src//app.py", "src/app.py"),
        ("{repo}/src/app.py", "src/app.py"),
    ],
)
def test_evidence_paths_are_kept_relative_to_the_workspace(
    repo: Path, raw: str, relative: str
) -> None:
    assert workspace_relative(raw.format(repo=repo), repo) == relative


@pytest.mark.parametrize("raw", ["../outside.txt", "/etc/hostname", "src/../../x", "", "a\udce9b"])
def test_a_path_outside_the_workspace_or_not_utf8_is_refused(repo: Path, raw: str) -> None:
    with pytest.raises(Unverifiable):
        workspace_relative(raw, repo)


def test_a_symlink_is_never_followed_out_of_the_workspace(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    (repo / "link.txt").symlink_to(secret)
    (repo / "linked").symlink_to(tmp_path)
    with pytest.raises(Unverifiable, match="symlink"):
        read_state(repo, "link.txt")
    with pytest.raises(Unverifiable, match="symlink"):
        read_state(repo, "linked/secret.txt")


@pytest.mark.parametrize("relative", ["/etc/hostname", "../repo/Makefile", "src/../Makefile"])
def test_a_recorded_path_leading_out_of_the_workspace_is_never_read(
    repo: Path, relative: str
) -> None:
    """A hand-edited entry naming an absolute path once opened it: os.open ignores the folder
    descriptor for an absolute name."""
    with pytest.raises(Unverifiable, match="outside the workspace"):
        read_state(repo, relative)


def test_a_fifo_is_never_opened_and_a_missing_file_is_gone(repo: Path) -> None:
    os.mkfifo(repo / "pipe")
    with pytest.raises(Unverifiable, match="not a regular file"):
        read_state(repo, "pipe")  # opening a FIFO for reading would block
    with pytest.raises(FileNotFoundError):
        read_state(repo, "src/gone.py")
    with pytest.raises(FileNotFoundError):
        read_state(repo, "Makefile/inside")


def test_a_file_over_the_limit_is_never_read(repo: Path) -> None:
    big = repo / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(4096)  # sparse: the size is what counts
    with pytest.raises(Unverifiable, match="too large"):
        read_state(repo, "big.bin", limit=1024)


def test_a_deleted_workspace_is_unverifiable(tmp_path: Path) -> None:
    with pytest.raises(Unverifiable, match="is gone"):
        read_state(tmp_path / "deleted-repo", "Makefile")
