from cairn.config.paths import cairn_home, find_git_root, project_dir, sanitize_path_key


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
