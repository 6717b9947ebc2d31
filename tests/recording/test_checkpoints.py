"""The shadow repository: snapshots and restores of real git work trees, byte for byte."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cairn.recording.checkpoints import (
    CheckpointError,
    CheckpointLimits,
    FileChange,
    ShadowRepository,
    SnapshotTooLarge,
    git_unavailable_reason,
)

from ..git_helpers import (
    git,
    git_killing_its_caller,
    git_under_strace,
    make_repository,
    repository_state,
    tree_state,
)
from ..polling import eventually

FILES: dict[str, str | bytes] = {
    "README.md": "# demo\n",
    "src/app.py": "print('hello')\n",
    "src/windows.txt": b"line one\r\nline two\r\n",
    "data/blob.bin": bytes(range(256)) * 4,
    "data/keep.txt": "kept\n",  # git records no folders: keep data/ from becoming empty
    ".gitignore": "*.log\nbuild/\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repository(tmp_path / "work", FILES)
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(root / "run.sh", 0o755)  # noqa: S103 - an executable script
    os.symlink("src/app.py", root / "app-link")
    return root


@pytest.fixture
def shadow(repo: Path, tmp_path: Path) -> ShadowRepository:
    return ShadowRepository(repo, tmp_path / "store" / "checkpoints")


def _change_everything(root: Path) -> None:
    (root / "README.md").write_text("# changed\n")
    (root / "src" / "windows.txt").write_bytes(b"rewritten\r\n")
    (root / "data" / "blob.bin").unlink()
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / "file.py").write_text("x = 1\n")
    os.chmod(root / "run.sh", 0o644)
    (root / "app-link").unlink()
    os.symlink("README.md", root / "app-link")


def test_restore_puts_the_tree_back_byte_for_byte(repo: Path, shadow: ShadowRepository) -> None:
    before = tree_state(repo)
    checkpoint = shadow.snapshot("before turn 1")
    _change_everything(repo)

    report = shadow.restore(checkpoint.commit)

    assert tree_state(repo) == before
    assert sorted(report.removed) == ["new/deep/file.py"]
    assert "data/blob.bin" in report.restored
    assert report.kept == []


def test_a_restore_is_undone_by_restoring_its_undo_checkpoint(
    repo: Path, shadow: ShadowRepository
) -> None:
    checkpoint = shadow.snapshot("before")
    _change_everything(repo)
    changed = tree_state(repo)

    report = shadow.restore(checkpoint.commit)
    shadow.restore(report.undo.commit)

    assert tree_state(repo) == changed


def test_the_users_repository_state_is_never_touched(repo: Path, shadow: ShadowRepository) -> None:
    (repo / "README.md").write_text("# stashed work\n")
    git(repo, "stash", "push", "-q", "-m", "wip")
    (repo / "src" / "app.py").write_text("print('staged')\n")
    git(repo, "add", "src/app.py")
    git(repo, "branch", "feature")
    state = repository_state(repo)

    checkpoint = shadow.snapshot("before")
    _change_everything(repo)
    shadow.snapshot("after")
    shadow.restore(checkpoint.commit)

    assert repository_state(repo) == state


def test_hostile_repository_and_global_config_run_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout's config, attributes and the environment must not make our git run a program
    or convert what it stores."""
    marker = tmp_path / "pwned"
    evil = f"touch {marker}"
    with (repo / ".git" / "config").open("a") as config:
        config.write(
            f'[core]\n\tfsmonitor = "{evil}"\n\thooksPath = hooks\n'
            f'[filter "evil"]\n\tclean = "{evil}; cat"\n\tsmudge = "{evil}; cat"\n'
        )
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f'[core]\n\tfsmonitor = "{evil}"\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={evil}'")
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))  # a leaked variable must not redirect us
    (repo / ".gitattributes").write_text("* filter=evil text eol=crlf\n")
    (repo / "unix.txt").write_bytes(b"lf only\n")
    shadow = ShadowRepository(repo, tmp_path / "store")
    before = tree_state(repo)

    checkpoint = shadow.snapshot("before")
    (repo / "unix.txt").write_bytes(b"changed\n")
    (repo / "src" / "windows.txt").write_bytes(b"changed\n")
    shadow.restore(checkpoint.commit)

    assert not marker.exists()
    assert tree_state(repo) == before


def test_ignored_files_are_neither_captured_nor_touched(
    repo: Path, shadow: ShadowRepository
) -> None:
    (repo / "debug.log").write_text("old log\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_bytes(b"\x7fELF")
    checkpoint = shadow.snapshot("before")
    (repo / "debug.log").write_text("new log\n")
    (repo / "build" / "out.o").unlink()
    (repo / "later.log").write_text("created later\n")

    shadow.restore(checkpoint.commit)

    assert (repo / "debug.log").read_text() == "new log\n"
    assert not (repo / "build" / "out.o").exists()
    assert (repo / "later.log").exists()


def test_cairnignore_and_the_repositorys_exclude_file_are_respected(
    repo: Path, shadow: ShadowRepository
) -> None:
    (repo / ".cairnignore").write_text("secrets/\n")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("local-notes.txt\n")
    (repo / "secrets").mkdir()
    (repo / "secrets" / "key").write_text("hunter2\n")
    (repo / "local-notes.txt").write_text("mine\n")
    checkpoint = shadow.snapshot("before")
    (repo / "secrets" / "key").write_text("rotated\n")
    (repo / "local-notes.txt").write_text("still mine\n")

    shadow.restore(checkpoint.commit)

    assert (repo / "secrets" / "key").read_text() == "rotated\n"
    assert (repo / "local-notes.txt").read_text() == "still mine\n"


def test_the_memory_folder_inside_the_project_is_never_restored(
    repo: Path, shadow: ShadowRepository
) -> None:
    memory = repo / ".cairn" / "memory"
    memory.mkdir(parents=True)
    (repo / ".cairn" / "settings.json").write_text("{}\n")
    checkpoint = shadow.snapshot("before")
    (memory / "note.md").write_text("remembered during the turn\n")
    (repo / ".cairn" / ".memory.lock").write_text("")  # the memory root's lock, in use
    (repo / ".cairn" / "settings.json").write_text('{"x": 1}\n')

    shadow.restore(checkpoint.commit)

    assert (memory / "note.md").read_text() == "remembered during the turn\n"
    assert (repo / ".cairn" / ".memory.lock").exists()
    assert (repo / ".cairn" / "settings.json").read_text() == "{}\n"


def test_a_file_over_the_size_cap_is_skipped_reported_and_left_alone(
    repo: Path, tmp_path: Path
) -> None:
    shadow = ShadowRepository(repo, tmp_path / "store", CheckpointLimits(max_file_bytes=1500))
    (repo / "big.bin").write_bytes(b"x" * 5000)

    checkpoint = shadow.snapshot("before")
    (repo / "big.bin").write_bytes(b"y" * 6000)
    (repo / "README.md").write_text("# changed\n")
    report = shadow.restore(checkpoint.commit)

    assert [s.path for s in checkpoint.skipped] == ["big.bin"]
    assert "larger than" in checkpoint.skipped[0].reason
    assert (repo / "big.bin").read_bytes() == b"y" * 6000
    assert (repo / "README.md").read_text() == "# demo\n"
    assert [s.path for s in report.kept] == ["big.bin"]


def test_a_file_that_grows_over_the_cap_is_kept_when_restoring(repo: Path, tmp_path: Path) -> None:
    """Its current content is not captured, so overwriting it could not be undone."""
    shadow = ShadowRepository(repo, tmp_path / "store", CheckpointLimits(max_file_bytes=1500))
    checkpoint = shadow.snapshot("before")
    (repo / "README.md").write_bytes(b"z" * 2000)

    report = shadow.restore(checkpoint.commit)

    assert (repo / "README.md").read_bytes() == b"z" * 2000
    assert [s.path for s in report.kept] == ["README.md"]


def test_a_workspace_over_the_file_count_cap_gets_no_snapshot(repo: Path, tmp_path: Path) -> None:
    shadow = ShadowRepository(repo, tmp_path / "store", CheckpointLimits(max_files=3))

    with pytest.raises(SnapshotTooLarge, match=r"maxFiles \(3\)"):
        shadow.snapshot("before")


def test_a_workspace_over_the_total_size_cap_gets_no_snapshot(repo: Path, tmp_path: Path) -> None:
    shadow = ShadowRepository(repo, tmp_path / "store", CheckpointLimits(max_total_bytes=100))

    with pytest.raises(SnapshotTooLarge, match="maxSnapshotSizeMb"):
        shadow.snapshot("before")


def test_an_unchanged_workspace_reuses_the_last_snapshot(shadow: ShadowRepository) -> None:
    first = shadow.snapshot("one")
    second = shadow.snapshot("two")

    assert second.commit == first.commit
    assert second.reused and not first.reused
    assert first.files == 8


def test_changes_lists_what_differs_from_a_snapshot(repo: Path, shadow: ShadowRepository) -> None:
    checkpoint = shadow.snapshot("before")
    _change_everything(repo)

    changes = shadow.changes(checkpoint.commit)

    assert changes == [
        FileChange("README.md", "modified"),
        FileChange("app-link", "modified"),
        FileChange("data/blob.bin", "deleted"),
        FileChange("new/deep/file.py", "added"),
        FileChange("run.sh", "modified"),
        FileChange("src/windows.txt", "modified"),
    ]
    assert shadow.changes(checkpoint.commit, checkpoint.commit) == []


def test_a_nested_repository_is_skipped(repo: Path, shadow: ShadowRepository) -> None:
    make_repository(repo / "vendor" / "lib", {"lib.py": "x = 1\n"})

    checkpoint = shadow.snapshot("before")

    assert [(s.path, s.reason) for s in checkpoint.skipped] == [
        ("vendor/lib/", "nested git repository")
    ]


def test_file_names_with_pattern_characters_round_trip(repo: Path, tmp_path: Path) -> None:
    names = ["a*b.txt", "#hash", "!bang", " lead space", "trail space ", "q?[x].md", "é.txt"]
    for name in names:
        (repo / name).write_bytes(b"small")
    (repo / "big*[1].bin").write_bytes(b"x" * 2000)
    shadow = ShadowRepository(repo, tmp_path / "store", CheckpointLimits(max_file_bytes=1500))
    before = tree_state(repo)

    checkpoint = shadow.snapshot("before")
    for name in names:
        (repo / name).unlink()
    (repo / "big*[1].bin").write_bytes(b"y" * 2000)
    shadow.restore(checkpoint.commit)

    assert [s.path for s in checkpoint.skipped] == ["big*[1].bin"]
    assert {k: v for k, v in tree_state(repo).items() if k != "big*[1].bin"} == {
        k: v for k, v in before.items() if k != "big*[1].bin"
    }


def test_a_folder_replaced_by_a_file_is_restored(repo: Path, shadow: ShadowRepository) -> None:
    before = tree_state(repo)
    checkpoint = shadow.snapshot("before")
    for child in (repo / "src").iterdir():
        child.unlink()
    (repo / "src").rmdir()
    (repo / "src").write_text("now a file\n")

    shadow.restore(checkpoint.commit)

    assert tree_state(repo) == before


def test_a_work_tree_without_git_still_gets_checkpoints(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "notes.txt").write_text("one\n")
    shadow = ShadowRepository(folder, tmp_path / "store")

    checkpoint = shadow.snapshot("before")
    (folder / "notes.txt").write_text("two\n")
    shadow.restore(checkpoint.commit)

    assert (folder / "notes.txt").read_text() == "one\n"


def test_restoring_an_unknown_commit_is_a_clear_error(shadow: ShadowRepository) -> None:
    shadow.snapshot("before")

    with pytest.raises(CheckpointError, match="is not in"):
        shadow.restore("0" * 40)


def test_concurrent_snapshots_of_one_project_both_succeed(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    results: list[str] = []
    errors: list[BaseException] = []

    def take(name: str) -> None:
        try:
            (repo / f"{name}.txt").write_text(name)
            results.append(ShadowRepository(repo, store).snapshot(name).commit)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=take, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(results) == 4
    assert all(ShadowRepository(repo, store).exists(commit) for commit in results)


def test_a_stale_index_lock_from_a_crashed_git_does_not_block_snapshots(
    repo: Path, shadow: ShadowRepository
) -> None:
    shadow.snapshot("first")
    (shadow.git_dir / "index.lock").write_text("")
    (repo / "README.md").write_text("# after the crash\n")

    assert not shadow.snapshot("second").reused


def test_without_git_checkpoints_say_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    reason = git_unavailable_reason()

    assert reason is not None and "git is not installed" in reason


def test_a_checkpoint_is_never_restored_onto_another_work_tree(repo: Path, tmp_path: Path) -> None:
    """Regression (issue 24, data loss): two projects sharing one store (their paths differed
    only in punctuation) restored each other's checkpoints, deleting files."""
    store = tmp_path / "shared" / "checkpoints"
    twin = make_repository(tmp_path / "twin", {"theirs.txt": "theirs\n"})
    taken = ShadowRepository(repo, store).snapshot("before turn 1")
    twin_before = tree_state(twin)
    with pytest.raises(CheckpointError, match=r"was taken of .*work.*nothing was restored"):
        ShadowRepository(twin, store).restore(taken.commit)
    assert tree_state(twin) == twin_before


def test_a_preparation_finding_the_lock_held_leaves_the_work_to_its_holder(
    repo: Path, shadow: ShadowRepository
) -> None:
    """Across processes the checkpoint lock says a preparation or a snapshot is under way
    (either builds the index): a second preparation returns at once instead of waiting up to
    a minute to stage the same index."""
    from filelock import FileLock

    shadow.store.mkdir(parents=True, exist_ok=True)
    with FileLock(str(shadow.store / "lock")):
        assert shadow.prepare() is False
    assert not shadow.is_prepared()

    assert shadow.prepare() is True
    assert shadow.is_prepared()


def test_a_stopped_preparation_leaves_a_repository_the_next_snapshot_uses(
    repo: Path, shadow: ShadowRepository
) -> None:
    preparer = shadow.twin()
    preparer.stop()

    with pytest.raises(CheckpointError, match="stopped"):
        preparer.prepare()
    assert shadow.snapshot("after").files == len(FILES) + 2  # and run.sh, app-link


# ----- a git killed half-way (by stop(), or with cairn) leaves nothing that breaks later ones -----


def _half_made_by_a_killed_init(git_dir: Path) -> None:
    """The shadow repository as a ``git init --bare`` killed after writing HEAD leaves it. git's
    init (builtin/init-db.c: create_default_files, then create_object_directory) writes the
    templates, ``refs/`` and ``HEAD``, then ``config``, then ``objects/`` last; a ``config.lock``
    in the way makes the real git stop right there, as a kill between HEAD and objects/ does."""
    git_dir.mkdir(parents=True)
    (git_dir / "config.lock").write_text("")
    done = subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], capture_output=True)
    assert done.returncode != 0
    assert (git_dir / "HEAD").is_file() and (git_dir / "refs").is_dir()
    assert not (git_dir / "objects").exists() and not (git_dir / "config").exists()


def test_a_repository_a_killed_init_left_half_made_is_made_again(
    repo: Path, shadow: ShadowRepository
) -> None:
    """Regression: a preparation stopped during the shadow repository's `git init` left HEAD
    without objects/; every later snapshot of the project failed with "not a git repository"."""
    _half_made_by_a_killed_init(shadow.git_dir)
    before = tree_state(repo)

    checkpoint = shadow.snapshot("after")
    _change_everything(repo)
    shadow.restore(checkpoint.commit)

    assert checkpoint.files == len(FILES) + 2  # and run.sh, app-link
    assert tree_state(repo) == before
    assert sorted(os.listdir(shadow.store)) == ["README", "git", "lock", "meta"]


def test_a_git_init_killed_after_writing_head_does_not_break_later_snapshots(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    path = os.environ["PATH"]
    git_under_strace(tmp_path / "bin", "init", "signal=KILL:when=2")  # after HEAD, at config
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{path}")
    with pytest.raises(CheckpointError, match="git init was killed"):
        ShadowRepository(repo, store).snapshot("killed")
    monkeypatch.setenv("PATH", path)

    assert ShadowRepository(repo, store).snapshot("after").files == len(FILES) + 2
    assert sorted(os.listdir(store)) == ["README", "git", "lock", "meta"]


def test_a_preparation_stopped_during_git_init_leaves_nothing_in_the_way(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (seen once in CI, test_closing_the_session_stops_a_preparation_with_its_git_
    processes): the session's close stopped a preparation while it ran `git init`, after HEAD
    was written, and every later snapshot of the project failed with "not a git repository"."""
    store = tmp_path / "store"
    path = os.environ["PATH"]
    git_under_strace(tmp_path / "bin", "init", "delay_enter=60000000:when=2")  # holds at config
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{path}")
    preparer = ShadowRepository(repo, store)
    errors: list[BaseException] = []

    def prepare() -> None:
        try:
            preparer.prepare()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=prepare)
    thread.start()
    assert eventually(lambda: any(store.glob("*/HEAD")))  # written; config and objects/ not
    preparer.stop()
    thread.join()
    monkeypatch.setenv("PATH", path)

    assert [str(e) for e in errors] == ["stopped"]
    assert ShadowRepository(repo, store).snapshot("after").files == len(FILES) + 2
    assert sorted(os.listdir(store)) == ["README", "git", "lock", "meta"]


def test_a_ref_update_killed_half_way_does_not_block_later_snapshots(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git update-ref` locks the branch and HEAD (`<name>.lock` files) and renames the branch's
    lock into place: killed before that, it leaves both locks, and every later snapshot that
    moves the branch failed with "cannot lock ref"."""
    store = tmp_path / "store"
    first = ShadowRepository(repo, store).snapshot("first")
    path = os.environ["PATH"]
    git_under_strace(tmp_path / "bin", "update-ref", "signal=KILL:when=1")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{path}")
    (repo / "README.md").write_text("# killed while recorded\n")
    with pytest.raises(CheckpointError, match="git update-ref was killed"):
        ShadowRepository(repo, store).snapshot("killed")
    monkeypatch.setenv("PATH", path)
    (repo / "README.md").write_text("# after\n")

    shadow = ShadowRepository(repo, store)
    after = shadow.snapshot("after")
    assert not after.reused
    assert [c.path for c in shadow.changes(first.commit, after.commit)] == ["README.md"]


def test_stale_ref_locks_do_not_block_snapshots(repo: Path, shadow: ShadowRepository) -> None:
    """The locks a `git update-ref` killed half-way leaves (the test above makes them with a
    real kill where strace can)."""
    shadow.snapshot("first")
    (shadow.git_dir / "refs" / "heads" / "checkpoints.lock").write_text("")
    (shadow.git_dir / "HEAD.lock").write_text("")
    (repo / "README.md").write_text("# after the crash\n")

    assert not shadow.snapshot("second").reused


def test_a_repository_missing_its_neutral_attributes_gets_them_back(
    repo: Path, shadow: ShadowRepository
) -> None:
    """Regression: the neutral attributes were written after `git init`; a stop (or a crash)
    between the two left a repository in which the project's .gitattributes converted what a
    snapshot stores (here CRLF to LF), for good."""
    shadow.snapshot("first")
    (shadow.git_dir / "info" / "attributes").unlink()
    (repo / ".gitattributes").write_text("* text\n")
    (repo / "dos.txt").write_bytes(b"line one\r\nline two\r\n")
    before = tree_state(repo)

    checkpoint = shadow.snapshot("with attributes")
    (repo / "dos.txt").write_bytes(b"changed\n")
    shadow.restore(checkpoint.commit)

    assert tree_state(repo) == before  # dos.txt has its CRLFs back


def test_a_repository_that_lost_its_head_is_repaired_keeping_its_snapshots(
    repo: Path, shadow: ShadowRepository
) -> None:
    before = tree_state(repo)
    checkpoint = shadow.snapshot("first")
    (shadow.git_dir / "HEAD").unlink()
    _change_everything(repo)

    shadow.snapshot("second")
    shadow.restore(checkpoint.commit)

    assert tree_state(repo) == before


def test_a_damaged_repository_holding_snapshots_is_kept_with_a_clear_error(
    repo: Path, shadow: ShadowRepository
) -> None:
    first = shadow.snapshot("first")
    (shadow.git_dir / "HEAD").write_text("garbage\n")
    held = sorted(p.relative_to(shadow.git_dir) for p in shadow.git_dir.rglob("*"))

    with pytest.raises(CheckpointError) as raised:
        shadow.snapshot("second")
    with pytest.raises(CheckpointError, match="is damaged"):
        shadow.restore(first.commit)

    message = str(raised.value)
    assert str(shadow.git_dir) in message and "moved away or deleted" in message
    assert sorted(p.relative_to(shadow.git_dir) for p in shadow.git_dir.rglob("*")) == held


# ----- a restore cut short (killed, timed out, or cairn stopped) -----


def test_a_restore_killed_half_way_leaves_an_undo_that_puts_every_file_back(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git checkout-index` killed writing its third file (as the 60 s timeout or a stop kills
    it): the files before it are restored, that one is cut off, the others are as they were. The
    error carries the undo snapshot, taken (and handed to ``before_writing``) before anything
    was written, and restoring it puts every file back as it was before the restore."""
    store = tmp_path / "store"
    checkpoint = ShadowRepository(repo, store).snapshot("before the turn")
    _change_everything(repo)
    before_restore = tree_state(repo)
    path = os.environ["PATH"]
    cut = repo / "data" / "blob.bin"  # after README.md and app-link, before run.sh and src/
    git_under_strace(tmp_path / "bin", "checkout-index", "signal=KILL", syscall="write", path=cut)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{path}")
    told: list[str] = []

    with pytest.raises(CheckpointError, match="git checkout-index was killed") as raised:
        ShadowRepository(repo, store).restore(
            checkpoint.commit, before_writing=lambda undo: told.append(undo.commit)
        )
    monkeypatch.setenv("PATH", path)

    undo = raised.value.undo  # type: ignore[attr-defined]
    assert told == [undo.commit]
    assert (repo / "README.md").read_text() == "# demo\n"  # written first: restored
    assert os.readlink(repo / "app-link") == "src/app.py"
    assert cut.read_bytes() == b""  # cut off
    assert (repo / "src" / "windows.txt").read_bytes() == b"rewritten\r\n"  # not reached
    assert not (repo / "new").exists()  # created since: removed before the writes

    ShadowRepository(repo, store).restore(undo.commit)
    assert tree_state(repo) == before_restore
    assert sorted(os.listdir(store)) == ["README", "git", "lock", "meta"]


def test_a_restore_that_fails_before_writing_says_nothing_changed(
    repo: Path, shadow: ShadowRepository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = shadow.snapshot("first")
    _change_everything(repo)
    before = tree_state(repo)
    path = os.environ["PATH"]
    git_under_strace(tmp_path / "bin", "read-tree", "signal=KILL:when=1", syscall="/^rename")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{path}")
    told: list[str] = []

    with pytest.raises(CheckpointError) as raised:
        ShadowRepository(repo, shadow.store).restore(
            checkpoint.commit, before_writing=lambda undo: told.append(undo.commit)
        )

    assert not hasattr(raised.value, "undo") and told == []
    assert tree_state(repo) == before


def test_a_restore_folder_a_crash_left_is_removed_by_the_next_operation(
    repo: Path, tmp_path: Path
) -> None:
    """cairn killed while its restore runs `git checkout-index`: the restore's temporary folder
    (the target's index) stays in the checkpoints folder; the next operation, holding the
    project's lock (so no restore of any process is using one), removes it."""
    store = tmp_path / "store"
    checkpoint = ShadowRepository(repo, store).snapshot("first")
    _change_everything(repo)
    git_killing_its_caller(tmp_path / "bin", "checkout-index")
    script = (
        "import sys; from pathlib import Path; "
        "from cairn.recording.checkpoints import ShadowRepository; "
        "ShadowRepository(Path(sys.argv[1]), Path(sys.argv[2])).restore(sys.argv[3])"
    )
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(repo), str(store), checkpoint.commit],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert list(store.glob("restore-*"))

    ShadowRepository(repo, store).snapshot("after")
    assert sorted(os.listdir(store)) == ["README", "git", "lock", "meta"]


def test_the_shadow_repository_is_private_to_its_owner(
    repo: Path, shadow: ShadowRepository
) -> None:
    """It holds a copy of every captured file, including ones only their owner can read."""
    shadow.snapshot("first")
    assert stat.S_IMODE(shadow.git_dir.stat().st_mode) == 0o700
    os.chmod(shadow.git_dir, 0o755)  # noqa: S103 - as cairn made it before (the umask's mode)
    (repo / "README.md").write_text("# second\n")

    shadow.snapshot("second")
    assert stat.S_IMODE(shadow.git_dir.stat().st_mode) == 0o700
