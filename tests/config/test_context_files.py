from cairn.config.context_files import collect_context_files, render_context_files


def test_context_files_are_collected_from_home_then_git_root_down_to_cwd(tmp_path):
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    sub = repo / "pkg"
    (repo / ".git").mkdir(parents=True)
    sub.mkdir()
    home.mkdir()
    (home / "AGENTS.md").write_text("global rules")
    (repo / "AGENTS.md").write_text("repo rules")
    (sub / "CAIRN.md").write_text("package rules")
    (tmp_path / "AGENTS.md").write_text("outside the repo: not collected")
    files, warnings = collect_context_files(sub, ["AGENTS.md", "CAIRN.md"], home=home)
    assert [f.text for f in files] == ["global rules", "repo rules", "package rules"]
    assert warnings == []
    rendered = render_context_files(files)
    assert rendered.index("repo rules") < rendered.index("package rules")
    assert f"--- Context from: {sub / 'CAIRN.md'} ---" in rendered


def test_blank_context_files_are_ignored(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("   \n")
    files, _ = collect_context_files(tmp_path, "AGENTS.md", home=tmp_path / "nohome")
    assert files == []
