"""``cairn rewind`` and ``cairn -p --continue`` on a real git repository.

The turns are real ``cairn -p`` processes. ``cairn rewind`` runs through cairn's entry point in
this process (tests/entry_point.py: what is checked is the command's work and its messages),
except for one successful rewind and one refused one, which stay real processes.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from cairn.config.paths import project_dir
from cairn.testing import ScriptedServer, reply, tool_call

from ..entry_point import run_main
from ..git_helpers import git_killing_its_caller, make_repository, repository_state, tree_state
from .conftest import RunCairn, write_settings


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A real git repository (the shared fixture's folder has an empty .git)."""
    root = make_repository(tmp_path / "project", {"README.md": "# one\n", "app.py": "v = 1\n"})
    write_settings(root, {"memory": {"enableManagedAutoMemory": False}})
    return root


def _turn(run_cairn: RunCairn, prompt: str, *, first: bool = False) -> None:
    args = ["-p", prompt, "--yolo"] + ([] if first else ["--continue"])
    done = run_cairn(*args)
    assert done.returncode == 0, done.stderr


def _rewind(project: Path, env: dict[str, str], *args: str) -> CompletedProcess[str]:
    """``cairn rewind *args`` in ``project``, run in this process."""
    return run_main(["rewind", *args], cwd=project, env=env)


def _sent_text(server: ScriptedServer) -> str:
    return json.dumps(server.requests_for("main")[-1].messages)


def test_rewinding_a_headless_session_from_the_command_line(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    user_repo = repository_state(project)
    states = [tree_state(project)]
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "README.md", "content": "# two\n"}),
        reply("Edited."),
    )
    _turn(run_cairn, "EDIT-THE-README", first=True)
    states.append(tree_state(project))
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "lib/new.py", "content": "n = 2\n"}),
        reply("Created."),
    )
    _turn(run_cairn, "CREATE-A-MODULE")
    states.append(tree_state(project))
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "rm app.py"}), reply("Deleted.")
    )
    _turn(run_cairn, "DELETE-THE-APP")

    listing = _rewind(project, cairn_env, "--list")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[1].startswith("  3. DELETE-THE-APP") and "app.py" in lines[1]
    assert lines[3].startswith("  1. EDIT-THE-README") and "README.md" in lines[3]

    code = run_cairn("rewind", "2", "--code-only")  # a real process
    assert code.returncode == 0, code.stderr
    assert tree_state(project) == states[1]
    undo = _rewind(project, cairn_env, "--undo")
    assert undo.returncode == 0, undo.stderr
    assert not (project / "app.py").exists() and (project / "lib" / "new.py").exists()

    talk = _rewind(project, cairn_env, "2", "--conversation-only")
    assert talk.returncode == 0, talk.stderr
    assert "Resume with: cairn --resume" in talk.stdout
    scripted_server.enqueue(reply("Continuing."))
    _turn(run_cairn, "AFTER-THE-REWIND")
    sent = _sent_text(scripted_server)
    assert "EDIT-THE-README" in sent and "AFTER-THE-REWIND" in sent
    assert "CREATE-A-MODULE" not in sent and "DELETE-THE-APP" not in sent

    assert repository_state(project) == user_repo


def test_bad_rewind_requests_exit_42_with_a_message(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    none_yet = run_cairn("rewind", "--list")  # a real process
    assert none_yet.returncode == 42 and "no recorded session" in none_yet.stderr

    scripted_server.enqueue(reply("Hi."))
    _turn(run_cairn, "hello", first=True)
    for args, message in [
        (("rewind", "7"), "there is no turn 7"),
        (("rewind", "1", "--code-only", "--conversation-only"), "exclude each other"),
        (("rewind", "--undo"), "no rewind to undo"),
        (("rewind", "--session", "not-a-session", "--list"), "no session found"),
    ]:
        done = run_main(args, cwd=project, env=cairn_env)
        assert done.returncode == 42, (args, done.stderr)
        assert message in done.stderr
        assert "Traceback" not in done.stderr


def test_a_turn_that_took_no_checkpoint_is_said_not_reported_as_unchanged(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    """Regression (issue 24): in a project over the file cap no checkpoint was taken, and
    `cairn rewind` said "no files changed since that turn" although the turn had changed one."""
    for index in range(4):
        (project / f"extra{index}.txt").write_text("x\n")
    write_settings(
        project,
        {"memory": {"enableManagedAutoMemory": False},
         "general": {"checkpointing": {"maxFiles": 3}}},
    )  # fmt: skip
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "README.md", "content": "# changed\n"}),
        reply("Edited."),
    )
    _turn(run_cairn, "EDIT-IN-A-BIG-PROJECT", first=True)

    code = _rewind(project, cairn_env, "1", "--code-only")
    assert code.returncode == 42
    assert "took no checkpoint" in code.stderr and "maxFiles" in code.stderr

    both = _rewind(project, cairn_env, "1")
    assert both.returncode == 0, both.stderr
    assert "no files changed" not in both.stdout
    assert "took no checkpoint" in both.stdout and "maxFiles" in both.stdout, both.stdout
    assert (project / "README.md").read_text() == "# changed\n"


def test_a_cairn_killed_mid_restore_leaves_a_rewind_whose_undo_puts_the_files_back(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    cairn_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """`cairn rewind 1` killed while its restore runs `git checkout-index` (the created file is
    already removed, nothing written back yet): the recording holds the rewind and its undo
    snapshot, so `cairn rewind --list` says it stopped part way and `cairn rewind --undo` puts
    back every file as it was before; the restore's temporary folder is swept."""
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "README.md", "content": "# two\n"}),
        reply("Edited."),
    )
    _turn(run_cairn, "EDIT-THE-README", first=True)
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "lib/new.py", "content": "n = 2\n"}),
        reply("Created."),
    )
    _turn(run_cairn, "CREATE-A-MODULE")
    before = tree_state(project)
    git_killing_its_caller(tmp_path / "bin", "checkout-index")
    env = {**cairn_env, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{cairn_env['PATH']}"}

    killed = run_cairn("rewind", "1", env=env)  # a real process, killed
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (project / "lib" / "new.py").exists()  # removed before the writes
    assert (project / "README.md").read_text() == "# two\n"  # not written back
    store = project_dir(project, Path(cairn_env["CAIRN_HOME"])) / "checkpoints"
    assert list(store.glob("restore-*"))

    listing = _rewind(project, cairn_env, "--list")
    assert "The last rewind stopped part way" in listing.stdout, listing.stdout
    undo = _rewind(project, cairn_env, "--undo")
    assert undo.returncode == 0, undo.stderr
    assert tree_state(project) == before
    assert not list(store.glob("restore-*"))
