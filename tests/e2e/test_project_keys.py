"""Projects whose paths differ only in punctuation keep their own state (real ``cairn``
processes, real git repositories), and folders of the earlier key layout are migrated.

The turns are real ``cairn -p`` processes (16 of them: what makes this module cost what it
does); ``cairn rewind`` runs through cairn's entry point in this process (tests/entry_point.py;
tests/e2e/test_rewind.py keeps real-process rewinds).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cairn.config.paths import project_key, reference_project_key
from cairn.testing import ScriptedServer, reply, tool_call

from ..entry_point import run_main
from ..git_helpers import make_repository, tree_state
from .conftest import CAIRN, write_settings

TWIN_NAMES = ("a-b", "a.b", "a_b", "a b")  # one key under the reference's rule


def _project(parent: Path, name: str) -> Path:
    root = make_repository(parent / name, {"README.md": f"# {name}\n", "app.py": "v = 1\n"})
    write_settings(root, {"memory": {"enableManagedAutoMemory": False}})
    return root


def _cairn(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*CAIRN, *args], cwd=root, env=env, input="", capture_output=True, text=True, timeout=60
    )
    return done


def _turn(root: Path, env: dict[str, str], prompt: str, *, first: bool = False) -> None:
    args = ["-p", prompt, "--yolo"] + ([] if first else ["--continue"])
    done = _cairn(root, env, *args)
    assert done.returncode == 0, done.stderr


def _sent(server: ScriptedServer) -> str:
    return json.dumps(server.requests_for("main")[-1].messages)


@pytest.fixture
def twins(tmp_path: Path) -> list[Path]:
    return [_project(tmp_path / "x", name) for name in TWIN_NAMES]


def test_continue_in_a_punctuation_twin_does_not_resume_the_others_conversation(
    twins: list[Path], cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """Regression (issue 24): /x/a-b, /x/a.b, /x/a_b and '/x/a b' mapped to one project key, so
    `--continue` in one resumed the other's conversation."""
    for root in twins:
        scripted_server.enqueue(reply("Noted."))
        _turn(root, cairn_env, f"SECRET-OF-{root.name}", first=True)
    for root in twins:
        scripted_server.enqueue(reply("Continuing."))
        _turn(root, cairn_env, "AND-NOW")
        sent = _sent(scripted_server)
        assert f"SECRET-OF-{root.name}" in sent
        others = [f"SECRET-OF-{other.name}" for other in twins if other != root]
        assert not any(other in sent for other in others), sent


def test_rewind_in_one_project_never_restores_its_punctuation_twins_files(
    twins: list[Path], cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """Regression (issue 24, data loss): `cairn rewind 1` in one project restored the checkpoint
    of another whose path differed only in punctuation, deleting that project's files."""
    first, second = twins[0], twins[1]
    second_before_its_turn = tree_state(second)
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "theirs.py", "content": "second = 2\n"}),
        reply("Written."),
    )
    _turn(second, cairn_env, "WRITE-IN-SECOND", first=True)
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "mine.py", "content": "first = 1\n"}),
        reply("Written."),
    )
    _turn(first, cairn_env, "WRITE-IN-FIRST", first=True)  # the newest session of all
    first_after = tree_state(first)

    done = run_main(["rewind", "1", "--code-only"], cwd=second, env=cairn_env)
    assert done.returncode == 0, done.stderr
    assert tree_state(second) == second_before_its_turn  # its own turn undone, nothing else
    assert tree_state(first) == first_after


def _legacy(env: dict[str, str], root: Path) -> Path:
    return Path(env["CAIRN_HOME"]) / "projects" / reference_project_key(root)


def _only_project_folder(env: dict[str, str], root: Path) -> Path:
    """The project folder of ``root`` (the current key layout), which must exist."""
    folder = Path(env["CAIRN_HOME"]) / "projects" / project_key(root)
    assert folder.is_dir() and folder != _legacy(env, root), folder
    return folder


def test_a_project_folder_of_the_earlier_key_layout_is_migrated_with_everything(
    tmp_path: Path, cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """Regression (issue 24): the project key changed; the folder an earlier cairn kept under the
    punctuation-only key (recordings, checkpoints, memory, cursors) is found and moved."""
    root = _project(tmp_path, "my.project")
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "new.py", "content": "n = 1\n"}), reply("Written.")
    )
    _turn(root, cairn_env, "EARLIER-PROMPT", first=True)
    current = _only_project_folder(cairn_env, root)
    (current / "memory" / "project").mkdir(parents=True)
    (current / "memory" / "project" / "fact.md").write_text("---\nname: f\n---\nkept\n")
    (current / "extract-cursor.json").write_text('{"sessionId": "s", "index": 3}')
    before = sorted(str(p.relative_to(current)) for p in current.rglob("*"))
    legacy = _legacy(cairn_env, root)
    current.rename(legacy)  # the layout an earlier cairn left

    scripted_server.enqueue(reply("Continuing."))
    _turn(root, cairn_env, "LATER-PROMPT")
    assert "EARLIER-PROMPT" in _sent(scripted_server)
    assert not legacy.exists()
    migrated = _only_project_folder(cairn_env, root)
    after = {str(p.relative_to(migrated)) for p in migrated.rglob("*")}
    assert set(before) <= after
    assert (migrated / "memory" / "project" / "fact.md").read_text().endswith("kept\n")
    listing = run_main(["rewind", "--list"], cwd=root, env=cairn_env)
    assert listing.returncode == 0 and "EARLIER-PROMPT" in listing.stdout, listing.stderr


def test_a_shared_folder_of_the_earlier_layout_is_split_between_the_twins_losslessly(
    twins: list[Path], cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """Regression (issue 24): twins that shared one folder under the earlier key each get their
    own recordings back and a copy of what cannot be told apart (memory, checkpoints)."""
    first, second = twins[0], twins[1]
    for root in (first, second):
        scripted_server.enqueue(reply("Noted."))
        _turn(root, cairn_env, f"SECRET-OF-{root.name}", first=True)
    legacy = _legacy(cairn_env, first)
    for root in (first, second):  # merge both into the one folder an earlier cairn shared
        folder = _only_project_folder(cairn_env, root)
        shutil.copytree(folder, legacy, dirs_exist_ok=True)
        shutil.rmtree(folder)
    (legacy / "memory" / "project").mkdir(parents=True)
    (legacy / "memory" / "project" / "shared.md").write_text("---\nname: s\n---\nshared\n")

    for root in (second, first):
        scripted_server.enqueue(reply("Continuing."))
        _turn(root, cairn_env, "AND-NOW")
        sent = _sent(scripted_server)
        assert f"SECRET-OF-{root.name}" in sent
        other = first if root == second else second
        assert f"SECRET-OF-{other.name}" not in sent
        folder = _only_project_folder(cairn_env, root)
        assert (folder / "memory" / "project" / "shared.md").read_text().endswith("shared\n")
