"""Migration of project folders of the earlier key layout (cairn/config/project_folders.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.config.paths import project_dir, project_key, reference_project_key
from cairn.config.project_folders import _move, recording_owner


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cairn-home"
    home.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(home))
    return home.resolve()


def _project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / "x" / name
    root.mkdir(parents=True)
    return root.resolve()


def _record(folder: Path, session: str, cwd: Path, *, subfolder: str = "chats") -> Path:
    path = folder / subfolder / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    first = {"uuid": "u", "sessionId": session, "type": "user", "cwd": str(cwd)}
    path.write_text(json.dumps(first) + "\n" + json.dumps({"type": "assistant"}) + "\n")
    return path


def _legacy_folder(home: Path, root: Path) -> Path:
    folder = home / "projects" / reference_project_key(root)
    (folder / "memory" / "project").mkdir(parents=True)
    (folder / "memory" / "project" / "fact.md").write_text("---\nname: fact\n---\nkept\n")
    (folder / "extract-cursor.json").write_text('{"index": 4}')
    objects = folder / "checkpoints" / "git" / "objects" / "ab"
    objects.mkdir(parents=True)
    (objects / "cdef").write_bytes(b"object")
    (folder / "checkpoints" / "lock").write_text("")
    return folder


def test_a_folder_only_this_project_used_is_renamed(home: Path, tmp_path: Path) -> None:
    root = _project(tmp_path, "my.project")
    legacy = _legacy_folder(home, root)
    _record(legacy, "s1", root)
    _record(legacy, "s2", root / "sub")  # a session started in a subfolder
    _record(legacy, "t1", root, subfolder="tenants/acme/chats")
    folder = project_dir(root)
    assert folder.name == project_key(root) and not legacy.exists()
    assert sorted(p.name for p in (folder / "chats").iterdir()) == ["s1.jsonl", "s2.jsonl"]
    assert (folder / "tenants" / "acme" / "chats" / "t1.jsonl").is_file()
    assert (folder / "memory" / "project" / "fact.md").read_text().endswith("kept\n")
    assert (folder / "extract-cursor.json").read_text() == '{"index": 4}'


def test_a_shared_folder_is_split_by_the_owner_of_each_recording(
    home: Path, tmp_path: Path
) -> None:
    first, second = _project(tmp_path, "a-b"), _project(tmp_path, "a.b")
    legacy = _legacy_folder(home, first)
    _record(legacy, "mine", first)
    _record(legacy, "theirs", second / "deep" / "er")
    _record(legacy, "unknown", Path("/elsewhere"))  # cannot be told: stays behind

    folder = project_dir(first)
    assert [p.name for p in (folder / "chats").iterdir()] == ["mine.jsonl"]
    assert sorted(p.name for p in (legacy / "chats").iterdir()) == [
        "theirs.jsonl",
        "unknown.jsonl",
    ]
    assert (folder / "memory" / "project" / "fact.md").read_text().endswith("kept\n")
    copied = folder / "checkpoints" / "git" / "objects" / "ab" / "cdef"
    assert copied.samefile(legacy / "checkpoints" / "git" / "objects" / "ab" / "cdef")
    assert not (folder / "checkpoints" / "lock").exists()  # a lock is never copied

    other = project_dir(second)  # the last owner takes the rest
    assert not legacy.exists()
    assert sorted(p.name for p in (other / "chats").iterdir()) == ["theirs.jsonl", "unknown.jsonl"]
    assert (other / "memory" / "project" / "fact.md").read_text().endswith("kept\n")


def test_a_new_folder_made_meanwhile_is_merged_into_not_replaced(
    home: Path, tmp_path: Path
) -> None:
    """A process that could not wait for the migration lock went on with the new folder: the
    migration then merges into it, overwriting nothing."""
    root = _project(tmp_path, "p")
    legacy = _legacy_folder(home, root)
    _record(legacy, "old", root)
    target = home / "projects" / project_key(root)
    _record(target, "new", root)
    (target / "extract-cursor.json").write_text('{"index": 9}')

    _move(legacy, target)
    assert sorted(p.name for p in (target / "chats").iterdir()) == ["new.jsonl", "old.jsonl"]
    assert (target / "extract-cursor.json").read_text() == '{"index": 9}'  # not overwritten
    assert (legacy / "extract-cursor.json").read_text() == '{"index": 4}'  # not lost either


def test_the_owner_of_a_recording_is_the_ancestor_with_the_folders_key(tmp_path: Path) -> None:
    recording = _record(tmp_path, "s", Path("/x/a.b/src/pkg"))
    assert recording_owner(recording, "-x-a-b") == Path("/x/a.b")
    assert recording_owner(recording, "-x-a-b-src") == Path("/x/a.b/src")
    assert recording_owner(recording, "-y") is None
    recording.write_text("not json\n")
    assert recording_owner(recording, "-x-a-b") is None


_MIGRATE = """
import sys
from pathlib import Path
from cairn.config.paths import project_dir
print(project_dir(Path(sys.argv[1])))
"""


@pytest.mark.slow
def test_concurrent_processes_migrate_a_shared_folder_once_and_lose_nothing(
    home: Path, tmp_path: Path
) -> None:
    twins = [_project(tmp_path, name) for name in ("a-b", "a.b", "a_b", "a b")]
    legacy = _legacy_folder(home, twins[0])
    for index, root in enumerate(twins):
        for n in range(5):
            _record(legacy, f"{index}-{n}", root)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _MIGRATE, str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for root in twins
        for _ in range(3)  # three processes of each project at once
    ]
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    assert not legacy.exists()
    for index, root in enumerate(twins):
        folder = home / "projects" / project_key(root)
        names = sorted(p.name for p in (folder / "chats").iterdir())
        assert names == [f"{index}-{n}.jsonl" for n in range(5)], (root, names)
        assert (folder / "memory" / "project" / "fact.md").read_text().endswith("kept\n")
    leftovers = [p.name for p in (home / "projects").iterdir() if p.name.startswith(".")]
    assert leftovers == [".migration.lock"]
