"""Memory roots for each environment variable (tests for cairn/memory/paths.py).

Named test_memory_paths.py: tests/config/test_paths.py already owns the module name test_paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.config.paths import project_key, reference_project_key
from cairn.memory.paths import MemoryRoots, memory_base, memory_roots


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a nested workspace folder."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "packages" / "api").mkdir(parents=True)
    return root


def test_base_is_cairn_home_by_default(tmp_path: Path) -> None:
    assert memory_base({"CAIRN_HOME": str(tmp_path / "home")}) == (tmp_path / "home").resolve()


def test_base_dir_variable_overrides_cairn_home(tmp_path: Path) -> None:
    environ = {"CAIRN_HOME": str(tmp_path / "home"), "CAIRN_MEMORY_BASE_DIR": str(tmp_path / "b")}
    assert memory_base(environ) == (tmp_path / "b").resolve()


def test_base_dir_expands_the_home_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert memory_base({"CAIRN_MEMORY_BASE_DIR": "~/mem"}) == (tmp_path / "mem").resolve()


def test_project_memory_is_keyed_by_the_git_root(repo: Path, tmp_path: Path) -> None:
    roots = memory_roots(repo / "packages" / "api", environ={"CAIRN_HOME": str(tmp_path / "h")})
    key = project_key(repo)
    base = (tmp_path / "h").resolve()
    assert roots == MemoryRoots(
        project=base / "projects" / key / "memory",
        user=base / "memories",
        state_dir=base / "projects" / key,
    )


def test_workspace_scope_keys_by_the_workspace_folder(repo: Path, tmp_path: Path) -> None:
    workspace = repo / "packages" / "api"
    environ = {"CAIRN_HOME": str(tmp_path / "h"), "CAIRN_MEMORY_PROJECT_SCOPE": " Workspace "}
    roots = memory_roots(workspace, environ=environ)
    assert roots.state_dir.name == project_key(workspace)


def test_unknown_scope_falls_back_to_the_git_root(repo: Path, tmp_path: Path) -> None:
    environ = {"CAIRN_HOME": str(tmp_path / "h"), "CAIRN_MEMORY_PROJECT_SCOPE": "galaxy"}
    roots = memory_roots(repo / "packages", environ=environ)
    assert roots.state_dir.name == project_key(repo)


def test_without_git_the_workspace_is_the_key(tmp_path: Path) -> None:
    workspace = tmp_path / "plain"
    workspace.mkdir()
    roots = memory_roots(workspace, environ={"CAIRN_HOME": str(tmp_path / "h")})
    assert roots.state_dir.name == project_key(workspace)


def test_local_memory_lives_in_the_project_but_state_stays_in_the_base(
    repo: Path, tmp_path: Path
) -> None:
    environ = {"CAIRN_HOME": str(tmp_path / "h"), "CAIRN_MEMORY_LOCAL": "1"}
    roots = memory_roots(repo, environ=environ)
    assert roots.project == repo.resolve() / ".cairn" / "memory"
    assert roots.state_dir == (tmp_path / "h").resolve() / "projects" / project_key(repo)


def test_local_flag_other_than_true_keeps_the_shared_root(repo: Path, tmp_path: Path) -> None:
    environ = {"CAIRN_HOME": str(tmp_path / "h"), "CAIRN_MEMORY_LOCAL": "0"}
    roots = memory_roots(repo, environ=environ)
    assert roots.project == roots.state_dir / "memory"


def test_base_dir_moves_user_and_project_memory_together(repo: Path, tmp_path: Path) -> None:
    environ = {"CAIRN_HOME": str(tmp_path / "h"), "CAIRN_MEMORY_BASE_DIR": str(tmp_path / "b")}
    roots = memory_roots(repo, environ=environ)
    assert roots.user == (tmp_path / "b").resolve() / "memories"
    assert roots.base == (tmp_path / "b").resolve()
    assert roots.state_dir.parent == (tmp_path / "b").resolve() / "projects"


def test_a_base_outside_cairn_home_keeps_the_reference_key(repo: Path, tmp_path: Path) -> None:
    """A base another tool may share (Qwen Code's layout) names projects as the reference
    does; cairn's own folders get the unambiguous key."""
    environ = {"CAIRN_HOME": str(tmp_path / "h"), "CAIRN_MEMORY_BASE_DIR": str(tmp_path / "b")}
    assert memory_roots(repo, environ=environ).state_dir.name == reference_project_key(repo)
    inside = {"CAIRN_HOME": str(tmp_path / "h"), "CAIRN_MEMORY_BASE_DIR": str(tmp_path / "h/t")}
    assert memory_roots(repo, environ=inside).state_dir.name == project_key(repo)


def test_missing_project_folder_has_no_project_root(tmp_path: Path) -> None:
    roots = memory_roots(tmp_path / "gone", environ={"CAIRN_HOME": str(tmp_path / "h")})
    assert roots.project is None
    assert roots.user == (tmp_path / "h").resolve() / "memories"
