from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cairn.config.paths import (
    cairn_home,
    find_git_root,
    project_dir,
    project_key,
    reference_project_key,
    sanitize_path_key,
)


def test_project_key_turns_every_non_alphanumeric_character_into_a_dash():
    assert sanitize_path_key("/home/me/my_repo.v2") == "-home-me-my-repo-v2"


def test_cairn_home_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "h"))
    assert cairn_home() == (tmp_path / "h").resolve()
    assert project_dir(tmp_path).parent == (tmp_path / "h" / "projects").resolve()


def test_git_root_is_the_nearest_folder_with_a_git_entry(tmp_path):
    (tmp_path / "outer" / ".git").mkdir(parents=True)
    inner = tmp_path / "outer" / "worktree"
    inner.mkdir()
    (inner / ".git").write_text("gitdir: elsewhere")  # a linked worktree has a .git file
    (inner / "src").mkdir()
    assert find_git_root(inner / "src") == inner.resolve()


def test_paths_differing_only_in_punctuation_get_different_keys():
    """Regression (issue 24): /x/a-b, /x/a.b, /x/a_b and '/x/a b' shared one project key."""
    keys = {project_key(Path(f"/x/{name}")) for name in ("a-b", "a.b", "a_b", "a b")}
    assert len(keys) == 4
    assert all(key.startswith("-x-a-b-") for key in keys)  # still readable
    assert reference_project_key(Path("/x/a.b")) == "-x-a-b"


_NAMES = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=300)


@given(st.lists(_NAMES, min_size=2, max_size=6, unique=True))
def test_project_keys_are_distinct_file_names_for_distinct_paths(names: list[str]) -> None:
    paths = {Path("/p", name.replace("\x00", "0")).resolve() for name in names}
    keys = {project_key(path) for path in paths}
    assert len(keys) == len(paths)
    for key in keys:
        assert "/" not in key and len(key.encode()) <= 255


def test_a_deep_path_keeps_the_end_of_its_readable_part(tmp_path):
    deep = Path("/" + "/".join(["folder"] * 60) + "/the-project")
    key = project_key(deep)
    assert len(key) <= 255 and "-the-project-" in key
