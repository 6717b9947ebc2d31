import os

import pytest

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


def _project(tmp_path):
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    return root


def test_a_context_file_linked_outside_the_project_is_skipped_with_a_warning(tmp_path):
    """Regression (#24, high): `AGENTS.md -> ../secret` put a file from outside the workspace
    into every request's system prompt (and the recording)."""
    root = _project(tmp_path)
    (tmp_path / "secret").write_text("password=hunter2")
    (root / "AGENTS.md").symlink_to("../secret")

    files, warnings = collect_context_files(root, ["AGENTS.md"], home=tmp_path / "nohome")

    assert files == []
    assert warnings == [
        f"{root / 'AGENTS.md'}: context file leads outside the project "
        f"({tmp_path / 'secret'}); skipped"
    ]


def test_a_context_file_linked_to_the_process_environment_is_skipped(tmp_path):
    """Regression (#24, high): `CAIRN.md -> /proc/self/environ` sent the API key and every
    variable in every request."""
    root = _project(tmp_path)
    (root / "CAIRN.md").symlink_to("/proc/self/environ")

    files, warnings = collect_context_files(root, ["CAIRN.md"], home=tmp_path / "nohome")

    assert files == []
    assert len(warnings) == 1 and "leads outside the project" in warnings[0]


def test_a_context_file_name_that_is_absolute_or_climbs_is_refused(tmp_path):
    """Regression (#24, high): a project's `context.fileName` of `/etc/hostname` or
    `../../secret` read that file into the prompt. A name is a file (or relative path) inside
    each folder, never absolute, never through `..`."""
    root = _project(tmp_path)
    home = tmp_path / "cairn-home"
    home.mkdir()
    (tmp_path / "secret").write_text("password=hunter2")
    (root / "AGENTS.md").write_text("repo rules")
    names = ["/etc/hostname", "../secret", "../../secret", "docs/../../secret", "AGENTS.md"]

    files, warnings = collect_context_files(root, names, home=home)

    assert [f.text for f in files] == ["repo rules"]
    assert warnings == [
        f"context file name {name!r} is ignored: a name is a file inside each folder "
        "(no absolute path, no `..`)"
        for name in names[:4]
    ]


def test_links_inside_the_project_and_the_users_own_files_are_read(tmp_path):
    root = _project(tmp_path)
    (root / "docs").mkdir()
    (root / "docs" / "agents.md").write_text("repo rules")
    (root / "AGENTS.md").symlink_to("docs/agents.md")
    home = tmp_path / "cairn-home"
    home.mkdir()
    (tmp_path / "dotfiles.md").write_text("my rules")
    (home / "AGENTS.md").symlink_to(tmp_path / "dotfiles.md")  # yours: read wherever it leads

    files, warnings = collect_context_files(root, ["AGENTS.md"], home=home)

    assert [f.text for f in files] == ["my rules", "repo rules"]
    assert warnings == []


SWAPPER = """
import os, sys, time
folder, secret, deadline = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
target = os.path.join(folder, "AGENTS.md")
template = os.path.join(folder, "template")
while time.monotonic() < deadline:
    os.symlink(secret, target + ".link")
    os.replace(target + ".link", target)  # AGENTS.md is now a link to the secret...
    os.link(template, target + ".file")
    os.replace(target + ".file", target)  # ...and a plain file inside the project again
"""


@pytest.mark.slow
def test_a_context_file_swapped_for_a_link_while_it_is_read_is_never_read_outside(tmp_path):
    """#24 follow-up: the containment check resolved the path and the read opened it again, so
    a file swapped for a link to a secret between the two (a process in the repository doing
    it in a loop) put the secret into the prompt. The check is made on the descriptor read."""
    import subprocess
    import sys
    import time

    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "template").write_text("project rules")
    os.link(project / "template", project / "AGENTS.md")
    secret = tmp_path / "secret"
    secret.write_text("SECRET-TOKEN-1234")
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(project), str(secret), "30"])
    read = refused = 0
    try:
        deadline = time.monotonic() + 8  # a bound on the attempts, not a timing assertion
        while time.monotonic() < deadline and (read < 50 or refused < 50):
            files, warnings = collect_context_files(project, "AGENTS.md", home=tmp_path / "h")
            assert all("SECRET" not in f.text for f in files), "the secret was read"
            read += bool(files)
            refused += bool(warnings)
    finally:
        swapper.kill()
        swapper.wait()
    assert read and refused  # both sides of the swap were met
