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


def test_a_context_file_that_is_a_fifo_is_skipped_with_a_warning_not_waited_on(tmp_path):
    """A FIFO named AGENTS.md would block every session's start (#18's FIFO class)."""
    import os

    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / "AGENTS.md")
    (tmp_path / "CAIRN.md").write_text("rules")

    files, warnings = collect_context_files(
        tmp_path, ["AGENTS.md", "CAIRN.md"], home=tmp_path / "nohome"
    )

    assert [f.text for f in files] == ["rules"]
    assert warnings == [f"{tmp_path / 'AGENTS.md'}: context file is a FIFO, not a file; skipped"]
