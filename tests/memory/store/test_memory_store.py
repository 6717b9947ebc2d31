"""The memory store on real folders: scanning, skipping, noticing changes, ranking, persisting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import debug_log
from cairn.memory.document import MemoryDoc
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.parse import render_memory_file

DAY = 86_400.0
T0 = 1_700_000_000.0


def write(
    root: Path,
    relative: str,
    *,
    name: str = "",
    description: str = "",
    body: str = "",
    type: str = "project",
    mtime: float | None = None,
) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(name or path.stem, description, type, body), "utf-8")  # type: ignore[arg-type]
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def roots(tmp_path: Path) -> MemoryRoots:
    return MemoryRoots(
        project=tmp_path / "base" / "projects" / "p" / "memory",
        user=tmp_path / "base" / "memories",
        state_dir=tmp_path / "base" / "projects" / "p",
    )


@pytest.fixture(params=[True, False], ids=["inotify", "polling"])
def store(request: pytest.FixtureRequest, roots: MemoryRoots) -> Iterator[MemoryStore]:
    opened = MemoryStore(roots, watch=request.param)
    yield opened
    opened.close()


def project(roots: MemoryRoots) -> Path:
    assert roots.project is not None
    return roots.project


def paths_of(docs: list[MemoryDoc]) -> list[str]:
    return [f"{doc.scope}:{doc.relative_path}" for doc in docs]


# --- scanning -------------------------------------------------------------------------------


def test_missing_roots_give_no_documents_and_no_warnings(store: MemoryStore) -> None:
    report = store.refresh()
    assert (report.docs, report.warnings, store.docs()) == (0, [], [])


def test_docs_are_project_first_then_user_each_newest_first(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(project(roots), "feedback/old.md", mtime=T0)
    write(project(roots), "project/new.md", mtime=T0 + DAY)
    write(roots.user, "user/newest.md", mtime=T0 + 2 * DAY)
    write(project(roots), "reference/b.md", mtime=T0)  # same mtime as old.md: file name decides
    assert paths_of(store.docs()) == [
        "project:project/new.md", "project:reference/b.md", "project:feedback/old.md",
        "user:user/newest.md",
    ]  # fmt: skip


def test_same_file_name_and_mtime_are_ordered_by_relative_path(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(project(roots), "user/a.md", mtime=T0)
    write(project(roots), "feedback/a.md", mtime=T0)
    assert paths_of(store.docs()) == ["project:feedback/a.md", "project:user/a.md"]


def test_pinned_and_nested_files_are_read_index_and_dot_entries_are_not(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    root = project(roots)
    write(root, "pinned/keep.md")
    write(root, "project/deep/nested.md")
    write(root, "legacy.md", type="user")
    (root / "MEMORY.md").write_text("- [x](x.md) — index\n", "utf-8")
    write(root, ".trash/gone.md")
    write(root, "project/.draft.md")
    (root / "project" / "notes.txt").write_text("not markdown", "utf-8")
    assert sorted(paths_of(store.docs())) == [
        "project:legacy.md", "project:pinned/keep.md", "project:project/deep/nested.md",
    ]  # fmt: skip
    assert store.refresh().warnings == []


def test_each_skipped_file_gets_exactly_one_warning(
    store: MemoryStore, roots: MemoryRoots, tmp_path: Path
) -> None:
    root = project(roots)
    write(root, "user/ok.md")
    (root / "user" / "no-front-matter.md").write_text("just text", "utf-8")
    (root / "user" / "memo.md").write_text("---\ntype: memo\n---\nx", "utf-8")
    (root / "user" / "huge.md").write_text("---\ntype: user\n---\n" + "x" * (1 << 20), "utf-8")
    (root / "user" / "binary.md").write_bytes(b"---\ntype: user\n---\n\x00\x00")
    outside = write(tmp_path / "elsewhere", "secret.md")
    (root / "user" / "escape.md").symlink_to(outside)
    (root / "user" / "dangling.md").symlink_to(root / "user" / "missing.md")
    (tmp_path / "elsewhere" / "folder").mkdir()
    (root / "linked-folder").symlink_to(tmp_path / "elsewhere" / "folder")
    report = store.refresh()
    reasons = sorted(warning.split("(", 1)[1] for warning in report.warnings)
    assert reasons == sorted([
        "no '---' front matter block)",
        "unknown type 'memo'; expected one of user, feedback, project, reference)",
        f"{(root / 'user' / 'huge.md').stat().st_size} bytes, over the 1 MiB limit)",
        "binary file)",
        "symlink leading out of the memory root)",
        "unreadable: No such file or directory)",
        "symlink leading out of the memory root)",
    ])  # fmt: skip
    assert paths_of(store.docs()) == ["project:user/ok.md"]
    assert store.refresh().warnings == report.warnings  # listed again, not duplicated


@pytest.mark.timeout(20)
def test_a_fifo_and_a_symlink_to_a_device_get_the_documented_warning(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    """Regression (#18): a FIFO or a `/dev/zero` symlink named *.md was skipped silently."""
    root = project(roots)
    write(root, "user/ok.md")
    os.mkfifo(root / "user" / "pipe.md")
    (root / "user" / "zero.md").symlink_to("/dev/zero")
    report = store.refresh()
    assert sorted(report.warnings) == [
        f"{root / 'user' / 'pipe.md'}: skipped (not a regular file: a FIFO)",
        f"{root / 'user' / 'zero.md'}: skipped (symlink leading out of the memory root)",
    ]
    assert paths_of(store.docs()) == ["project:user/ok.md"]
    os.mkfifo(root / "user" / "later.md")  # noticed by the watcher or the next walk
    assert f"{root / 'user' / 'later.md'}: skipped (not a regular file: a FIFO)" in (
        store.refresh().warnings
    )


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_index_still_written(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    """Regression (#18): one non-UTF-8 file name made every index rebuild (and turn) fail."""
    root = project(roots)
    write(root, "user/ok.md", name="OK")
    bad = Path(os.fsdecode(os.fsencode(root / "user") + b"/\xff\xfe.md"))
    bad.write_text(render_memory_file("Bad", "d", "user", "b"), "utf-8")
    report = store.refresh()
    assert report.warnings == [
        f"{root / 'user'}/\\xff\\xfe.md: skipped (the file name is not valid UTF-8)"
    ]
    assert paths_of(store.docs()) == ["project:user/ok.md"]
    store.rebuild_index_files()
    assert (root / "MEMORY.md").read_text("utf-8") == "- [OK](user/ok.md) — project\n"
    store.save()


@pytest.mark.timeout(60)
def test_a_memory_with_a_200000_character_title_is_indexed_and_listed(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    """Regression (#18): a 200,000-character title never finished an index rebuild."""
    write(project(roots), "user/long.md", name="T" * 200_000, description="d")
    store.rebuild_index_files()
    [line] = (project(roots) / "MEMORY.md").read_text("utf-8").splitlines()
    assert line.startswith("- [TTTT") and line.endswith("…](user/long.md)")
    assert len(line) <= 150


@pytest.mark.timeout(20)
def test_an_index_file_that_is_a_fifo_is_replaced_without_hanging(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    """Regression (#18): a FIFO at MEMORY.md hung every rebuild (and every prompt)."""
    root = project(roots)
    write(root, "user/ok.md", name="OK")
    os.mkfifo(root / "MEMORY.md")
    store.rebuild_index_files()
    assert (root / "MEMORY.md").read_text("utf-8") == "- [OK](user/ok.md) — project\n"


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temp folder another (unprivileged) user can enter."""
    folder = Path(tempfile.mkdtemp(prefix="cairn-perm-"))
    folder.chmod(0o755)
    yield folder
    for path in folder.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


def _refresh_without_privileges(roots: MemoryRoots) -> dict[str, list[str]]:
    """Refresh a store in a real process that cannot bypass file permissions (not root)."""
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from cairn.memory.paths import MemoryRoots\n"
        "from cairn.memory.store.memory_store import MemoryStore\n"
        "store = MemoryStore(MemoryRoots(*map(Path, sys.argv[1:4])))\n"
        "report = store.refresh()\n"
        "docs = [doc.relative_path for doc in store.docs()]\n"
        "print(json.dumps({'warnings': report.warnings, 'docs': docs}))\n"
    )
    command = [
        sys.executable,
        "-c",
        script,
        str(roots.project),
        str(roots.user),
        str(roots.state_dir),
    ]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot drop privileges")
        command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def test_unreadable_folders_and_files_are_skipped_with_one_warning_each(shared_tmp: Path) -> None:
    roots = MemoryRoots(
        project=shared_tmp / "memory", user=shared_tmp / "memories", state_dir=shared_tmp / "s"
    )
    write(project(roots), "user/ok.md")
    write(project(roots), "locked/inside.md")
    locked_file = write(project(roots), "user/secret.md")
    (project(roots) / "locked").chmod(0)
    locked_file.chmod(0)
    result = _refresh_without_privileges(roots)
    assert result["docs"] == ["user/ok.md"]
    assert sorted(result["warnings"]) == [
        f"{project(roots) / 'locked'}: folder skipped (unreadable: Permission denied)",
        f"{locked_file}: skipped (unreadable: Permission denied)",
    ]


def test_a_project_root_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real-memory"
    write(real, "user/ok.md")
    link = tmp_path / "state" / "memory"
    link.parent.mkdir()
    link.symlink_to(real)
    roots = MemoryRoots(project=link, user=tmp_path / "users", state_dir=tmp_path / "state")
    report = MemoryStore(roots).refresh()
    assert report.docs == 0
    assert report.warnings == [f"{link}: project memory root skipped (it is a symlink)"]


def test_a_user_root_that_is_a_symlink_is_read(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "memories"
    write(real, "user/ok.md")
    link = tmp_path / "base" / "memories"
    link.parent.mkdir()
    link.symlink_to(real)
    roots = MemoryRoots(project=None, user=link, state_dir=tmp_path / "base" / "projects" / "p")
    assert paths_of(MemoryStore(roots).docs()) == ["user:user/ok.md"]


# --- noticing changes -----------------------------------------------------------------------


def test_a_warm_refresh_rereads_only_the_changed_file(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    for i in range(5):
        write(project(roots), f"project/m{i}.md", body=f"version one {i}")
    assert store.refresh().reparsed == 5
    assert store.refresh().reparsed == 0
    write(project(roots), "project/m3.md", body="version two")
    report = store.refresh()
    assert (report.reparsed, report.removed) == (1, 0)
    assert store.get(project(roots) / "project/m3.md").body == "version two"  # type: ignore[union-attr]


def test_an_in_place_edit_by_another_process_is_noticed(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    path = write(project(roots), "project/m.md", body="colour: blue")
    store.refresh()
    script = (
        "import sys; p = sys.argv[1]; t = open(p).read()\n"
        "with open(p, 'r+') as f: f.write(t.replace('blue', 'teal'))"
    )  # same size, written in place: the folder's mtime does not move
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    report = store.refresh()
    assert report.reparsed == 1
    assert [hit.doc.relative_path for hit in store.rank("teal", limit=2)] == ["project/m.md"]
    assert store.rank("blue", limit=2) == []


def test_new_deleted_and_renamed_files_and_new_folders_are_noticed(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(project(roots), "project/keep.md")
    write(project(roots), "project/drop.md")
    write(project(roots), "project/rename.md")
    store.refresh()
    (project(roots) / "project" / "drop.md").unlink()
    (project(roots) / "project" / "rename.md").rename(project(roots) / "project" / "renamed.md")
    write(project(roots), "reference/brand-new-folder.md")
    write(roots.user, "user/first-user-memory.md")
    report = store.refresh()
    assert report.removed == 2
    assert sorted(paths_of(store.docs())) == [
        "project:project/keep.md", "project:project/renamed.md",
        "project:reference/brand-new-folder.md", "user:user/first-user-memory.md",
    ]  # fmt: skip


def test_a_file_that_turns_invalid_is_dropped_with_a_warning(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    path = write(project(roots), "project/m.md")
    store.refresh()
    path.write_text("no front matter any more", "utf-8")
    report = store.refresh()
    assert report.docs == 0
    assert report.warnings == [f"{path}: skipped (no '---' front matter block)"]


def test_a_removed_root_drops_its_documents(store: MemoryStore, roots: MemoryRoots) -> None:
    write(project(roots), "project/m.md")
    store.refresh()
    (project(roots) / "project" / "m.md").unlink()
    (project(roots) / "project").rmdir()
    project(roots).rmdir()
    assert store.refresh().docs == 0


def test_an_edit_to_a_symlinked_files_target_is_noticed(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    target = write(project(roots), "project/real.md", body="alpha")
    (project(roots) / "pinned").mkdir()
    (project(roots) / "pinned" / "alias.md").symlink_to(target)
    store.refresh()
    target.write_text(render_memory_file("real", "", "project", "omega words"), "utf-8")
    store.refresh()
    assert store.get(project(roots) / "pinned" / "alias.md").body == "omega words"  # type: ignore[union-attr]


# --- ranking --------------------------------------------------------------------------------


def test_rank_orders_by_relevance_and_returns_only_matches(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(project(roots), "feedback/uv.md", name="Use uv", description="install python packages")
    write(project(roots), "project/note.md", name="Release notes", body="we install with uv")
    write(project(roots), "project/other.md", name="Unrelated", body="nothing here")
    hits = store.rank("install packages with uv", limit=10)
    assert [hit.doc.relative_path for hit in hits] == ["feedback/uv.md", "project/note.md"]
    assert hits[0].score > hits[1].score > 0


def test_rank_respects_the_limit(store: MemoryStore, roots: MemoryRoots) -> None:
    for i in range(6):
        write(project(roots), f"project/m{i}.md", body="ledger")
    assert len(store.rank("ledger", limit=4)) == 4


def test_equal_scores_go_to_the_newest_then_to_docs_order(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(roots.user, "user/b.md", name="identical", mtime=T0 + DAY)
    write(roots.user, "user/a.md", name="identical", mtime=T0)
    write(project(roots), "project/z.md", name="identical", mtime=T0)
    write(project(roots), "user/y.md", name="identical", mtime=T0)
    hits = store.rank("identical", limit=4)
    assert len({hit.score for hit in hits}) == 1
    assert paths_of([hit.doc for hit in hits]) == [
        "user:user/b.md", "project:user/y.md", "project:project/z.md", "user:user/a.md",
    ]  # fmt: skip


def test_a_user_memory_is_not_pushed_out_by_type(store: MemoryStore, roots: MemoryRoots) -> None:
    """Regression (reference): ties are never broken by type, or user memories lose the top 2."""
    write(project(roots), "user/pref.md", name="terse", type="user", mtime=T0 + DAY)
    write(project(roots), "project/goal.md", name="terse", type="project", mtime=T0)
    assert store.rank("terse", limit=1)[0].doc.type == "user"


def test_excluded_documents_are_skipped_and_the_next_ones_fill_the_limit(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    for i in range(4):
        write(project(roots), f"project/m{i}.md", body="ledger " * (i + 1))
    hits = store.rank(
        "ledger", limit=2, exclude=lambda doc: doc.relative_path.endswith(("3.md", "2.md"))
    )
    assert [hit.doc.relative_path for hit in hits] == ["project/m1.md", "project/m0.md"]


def test_text_past_the_first_1200_body_characters_is_found(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(
        project(roots), "reference/runbook.md", body="step " * 400 + "error PX-419: rotate secret"
    )
    write(project(roots), "reference/other.md", body="nothing about it")
    assert [hit.doc.relative_path for hit in store.rank("PX-419", limit=2)] == [
        "reference/runbook.md"
    ]


def test_chinese_queries_match_chinese_memories(store: MemoryStore, roots: MemoryRoots) -> None:
    write(project(roots), "project/index.md", name="数据库迁移注意事项", body="大表加索引会锁表")
    write(project(roots), "project/alerts.md", name="结算延迟告警", body="超过 30 分钟触发告警")
    assert [hit.doc.relative_path for hit in store.rank("加索引会锁表吗", limit=2)] == [
        "project/index.md"
    ]


def test_an_empty_or_wordless_query_matches_nothing(store: MemoryStore, roots: MemoryRoots) -> None:
    write(project(roots), "project/m.md", body="ledger")
    assert store.rank("", limit=5) == store.rank("?! 表 ab", limit=5) == []


def test_get_finds_a_document_by_absolute_path(store: MemoryStore, roots: MemoryRoots) -> None:
    path = write(project(roots), "project/m.md")
    write(project(roots), "project/bad.md").write_text("broken", "utf-8")
    assert store.get(path) == store.docs()[0]
    assert store.get(project(roots) / "project" / "bad.md") is None
    assert store.get(Path("/elsewhere/m.md")) is None


def test_recent_lists_the_newest_documents_across_roots(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(project(roots), "project/old.md", mtime=T0)
    write(roots.user, "user/newer.md", mtime=T0 + DAY)
    write(project(roots), "project/newest.md", mtime=T0 + 2 * DAY)
    assert paths_of(store.recent(limit=2)) == ["project:project/newest.md", "user:user/newer.md"]
    skipped = store.recent(limit=2, exclude=lambda doc: doc.relative_path == "user/newer.md")
    assert paths_of(skipped) == ["project:project/newest.md", "project:project/old.md"]


def test_docs_containing_finds_each_text_in_a_title_description_or_body_in_docs_order(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(project(roots), "project/old.md", name="Deploy", body="via the STRASSE", mtime=T0)
    write(project(roots), "project/new.md", description="deploy to Straße", mtime=T0 + DAY)
    write(roots.user, "user/u.md", body="deploy nothing else", mtime=T0 + 2 * DAY)
    write(project(roots), "project/split.md", name="Dep", body="loy strasse", mtime=T0)
    assert paths_of(store.docs_containing("DEPLOY", "strasse")) == [
        "project:project/new.md",
        "project:project/old.md",
    ]
    assert paths_of(store.docs_containing("nothing", newest=1)) == [
        "project:project/new.md",
        "user:user/u.md",
    ]


def test_docs_containing_on_a_saved_index_sees_files_changed_since_it_was_saved(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    """Issue #28: the saved texts are searched without building every memory, but only after
    the files are checked: an edit, a new file and a deletion made while no store was open are
    all seen."""
    edited = write(project(roots), "project/edited.md", body="ledger", mtime=T0)
    emptied = write(project(roots), "project/emptied.md", body="ledger", mtime=T0)
    gone = write(project(roots), "project/gone.md", body="ledger", mtime=T0)
    for n in range(30):
        write(project(roots), f"project/other{n}.md", body="nothing here", mtime=T0)
    first = MemoryStore(roots, cache_dir=tmp_path / "cache")
    first.refresh()
    first.save()
    first.close()
    write(project(roots), "project/edited.md", body="the ledger and the lantern", mtime=T0)
    write(project(roots), "project/emptied.md", body="nothing", mtime=T0)
    gone.unlink()
    write(roots.user, "user/new.md", body="a LANTERN ledger")
    second = MemoryStore(roots, cache_dir=tmp_path / "cache")
    second.refresh()
    assert paths_of(second.docs_containing("ledger")) == [
        "project:project/edited.md",
        "user:user/new.md",
    ]
    assert [doc.path for doc in second.docs_containing("lantern", "the")] == [edited]
    assert emptied.exists()


# --- index files ----------------------------------------------------------------------------


def test_rebuild_writes_each_existing_roots_index_in_docs_order(
    store: MemoryStore, roots: MemoryRoots
) -> None:
    write(project(roots), "project/a.md", name="A", description="first", mtime=T0)
    write(project(roots), "project/b.md", name="B", description="second", mtime=T0 + DAY)
    store.rebuild_index_files()
    index = (project(roots) / "MEMORY.md").read_text("utf-8")
    assert index == "- [B](project/b.md) — second\n- [A](project/a.md) — first\n"
    assert not roots.user.exists()  # no user root: nothing created there
    assert store.refresh().docs == 2  # the index itself is not a memory


def test_a_listing_yields_each_memory_once_in_its_saved_order_from_a_first_page_unsorted(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    """Issue #28: `cairn memory list` takes its first page (200) from a heap over the saved
    dates, then sorts the rest: a memory of the page re-read because it changed is not listed
    again after it, a removed one not at all, and the rest keep their saved order."""
    root = project(roots)
    for n in range(230):
        write(root, f"project/m{n:03d}.md", description=f"fact {n}", mtime=T0 + n * DAY)
    saved = MemoryStore(roots, cache_dir=tmp_path / "saved")
    saved.refresh()
    saved.save()
    saved.close()
    (root / "project" / "m229.md").unlink()
    write(root, "project/m228.md", description="now the oldest", mtime=T0 - DAY)
    write(root, "project/m005.md", description="now the newest", mtime=T0 + 900 * DAY)
    total, docs = MemoryStore(roots, cache_dir=tmp_path / "saved").listing()
    listed = [(doc.relative_path, doc.description) for doc in docs]
    assert total == 229
    assert [path for path, _ in listed] == [f"project/m{n:03d}.md" for n in range(228, -1, -1)]
    assert listed[0][1] == "now the oldest"
    assert listed[-6][1] == "now the newest"


def test_a_reopened_saved_index_writes_the_index_of_its_newest_memories_as_a_fresh_store(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    """Issue #28: after a change, a new process (a `cairn memory forget`) finds the newest 200
    memories from the saved mtimes with a heap instead of sorting every memory: equal ties,
    skipped files, and memories changed or removed since the index was saved included."""
    root = project(roots)
    for n in range(230):
        write(root, f"project/m{n:03d}.md", description=f"fact {n}", mtime=T0 + (n % 150) * DAY)
    (root / "project" / "broken.md").write_text("no front matter", "utf-8")
    saved = MemoryStore(roots, cache_dir=tmp_path / "saved")
    saved.refresh()
    saved.save()
    saved.close()
    (root / "project" / "m149.md").unlink()  # one of the newest, gone
    write(root, "project/m010.md", description="edited", mtime=T0 + 400 * DAY)  # old, now newest
    write(root, "project/new.md", description="new", mtime=T0 + 149 * DAY)  # ties the newest
    reopened = MemoryStore(roots, cache_dir=tmp_path / "saved")
    reopened.rebuild_index_files({"project"})
    written = (root / "MEMORY.md").read_text("utf-8")
    assert not roots.user.exists()  # a scope not named: its index not written

    (root / "MEMORY.md").unlink()
    fresh = MemoryStore(roots, cache_dir=tmp_path / "fresh")
    fresh.rebuild_index_files()
    assert written == (root / "MEMORY.md").read_text("utf-8")
    assert written.startswith("- [m010](project/m010.md) — edited\n- [new](project/new.md) — new\n")


# --- persistence ----------------------------------------------------------------------------


def test_a_saved_store_opens_in_a_new_process_without_rereading_files(roots: MemoryRoots) -> None:
    for i in range(3):
        write(project(roots), f"project/m{i}.md", body=f"ledger {i}")
    write(roots.user, "user/u.md", body="ledger user")
    first = MemoryStore(roots)
    first.refresh()
    first.save()
    assert (roots.state_dir / "recall-index" / "project.bin").is_file()
    assert (roots.base / "recall-index" / "user.bin").is_file()
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from cairn.memory.paths import MemoryRoots\n"
        "from cairn.memory.store.memory_store import MemoryStore\n"
        "p, u, s = map(Path, sys.argv[1:4])\n"
        "store = MemoryStore(MemoryRoots(p, u, s))\n"
        "report = store.refresh()\n"
        "hits = [(h.doc.relative_path, h.score) for h in store.rank('ledger', limit=9)]\n"
        "print(json.dumps({'reparsed': report.reparsed, 'hits': hits}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(roots.project), str(roots.user), str(roots.state_dir)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert result["reparsed"] == 0
    assert result["hits"] == [
        [hit.doc.relative_path, hit.score] for hit in first.rank("ledger", limit=9)
    ]


def test_files_edited_while_no_store_was_open_are_noticed_on_load(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    write(project(roots), "project/a.md", body="before")
    write(project(roots), "project/b.md", body="stays")
    first = MemoryStore(roots, cache_dir=tmp_path / "cache")
    first.refresh()
    first.save()
    first.close()
    write(project(roots), "project/a.md", body="after the restart")
    second = MemoryStore(roots, cache_dir=tmp_path / "cache")
    report = second.refresh()
    assert report.reparsed == 1
    assert second.rank("restart", limit=1)[0].doc.relative_path == "project/a.md"


@pytest.mark.parametrize(
    "damage",
    [b"", b"not a marshal file", b"\xe3" * 40],
    ids=["empty", "garbage", "truncated-marshal"],
)
def test_a_damaged_cache_is_rebuilt_silently_with_a_debug_line(
    roots: MemoryRoots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: bytes
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    session = f"store-test-{tmp_path.name}"  # the debug log keeps one open file per session
    debug_log.set_process_session(session)
    try:
        write(project(roots), "project/m.md", body="ledger")
        cache = tmp_path / "cache"
        cache.mkdir()
        (cache / "project.bin").write_bytes(damage)
        store = MemoryStore(roots, cache_dir=cache)
        report = store.refresh()
        assert (report.reparsed, report.warnings) == (1, [])
        assert [hit.doc.relative_path for hit in store.rank("ledger", limit=1)] == ["project/m.md"]
        log = debug_log.log_path(session).read_text("utf-8")
        assert f"recall index {cache / 'project.bin'} not usable" in log
    finally:
        debug_log.set_process_session(None)


def test_a_cache_written_with_other_scorer_settings_is_rebuilt(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    from cairn.memory.store.scorer import ScorerConfig

    write(project(roots), "project/m.md", body="ledger")
    first = MemoryStore(roots, cache_dir=tmp_path / "c")
    first.refresh()
    first.save()
    second = MemoryStore(roots, cache_dir=tmp_path / "c", scorer=ScorerConfig(k1=2.0))
    assert second.refresh().reparsed == 1


def _unstemmed_cache(path: Path, root: Path, fingerprint: str) -> None:
    """A saved index as tokenizer version 1 wrote it: surface words, no stems."""
    from cairn.memory.store.cache import DocRecord, ShardCache, save_cache
    from cairn.memory.store.scan import stat_key

    old = ShardCache()
    slot = old.index.add({"tabs": 200, "indentation": 200, "uses": 90})
    info = (root / "feedback" / "tabs.md").stat()
    record = DocRecord(
        stat_key(info), slot, "feedback", "Tabs", "", "Indentation uses tabs", info.st_mtime,
        info.st_size, False,
    )  # fmt: skip
    old.records.put("feedback/tabs.md", record)
    assert save_cache(path, old, root=str(root), scope="project", fingerprint=fingerprint)


def test_an_index_saved_by_the_unstemmed_tokenizer_is_rebuilt(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    """Issue #26: a persisted index of tokenizer version 1 holds surface words ("indentation"),
    which a stemmed query ("indent") never matches; it is rebuilt, not read."""
    import hashlib

    from cairn.memory.store.scorer import DEFAULT_SCORER

    write(project(roots), "feedback/tabs.md", name="Tabs", body="Indentation uses tabs")
    version_one = repr((1, DEFAULT_SCORER.parameters()))
    old_fingerprint = hashlib.sha256(version_one.encode()).hexdigest()[:16]
    cache = tmp_path / "c" / "project.bin"
    _unstemmed_cache(cache, project(roots), DEFAULT_SCORER.fingerprint())
    stale = MemoryStore(roots, cache_dir=tmp_path / "c")
    assert stale.refresh().reparsed == 0  # the same fingerprint: the old postings are used ...
    assert stale.rank("indent", limit=1) == []  # ... and miss the word form

    _unstemmed_cache(cache, project(roots), old_fingerprint)
    store = MemoryStore(roots, cache_dir=tmp_path / "c")

    assert store.refresh().reparsed == 1
    assert [hit.doc.relative_path for hit in store.rank("indent", limit=1)] == ["feedback/tabs.md"]


def test_a_cache_of_another_root_is_not_used(roots: MemoryRoots, tmp_path: Path) -> None:
    write(project(roots), "project/m.md", body="ledger")
    first = MemoryStore(roots, cache_dir=tmp_path / "c")
    first.refresh()
    first.save()
    other = MemoryRoots(project=tmp_path / "other", user=roots.user, state_dir=roots.state_dir)
    write(tmp_path / "other", "project/n.md", body="ledger")
    second = MemoryStore(other, cache_dir=tmp_path / "c")
    assert paths_of(second.docs()) == ["project:project/n.md"]


def test_save_without_changes_does_not_rewrite_the_cache(
    roots: MemoryRoots, tmp_path: Path
) -> None:
    write(project(roots), "project/m.md")
    first = MemoryStore(roots, cache_dir=tmp_path / "c")
    first.refresh()
    first.save()
    inode = (tmp_path / "c" / "project.bin").stat().st_ino
    second = MemoryStore(roots, cache_dir=tmp_path / "c")
    second.refresh()
    second.save()
    assert (tmp_path / "c" / "project.bin").stat().st_ino == inode


# --- incremental equals rebuilt -------------------------------------------------------------

_names = st.sampled_from([f"m{i}" for i in range(6)])
_bodies = st.lists(st.sampled_from(["ledger", "payout", "retry", "uv", "发布流程", "测试"]),
                   min_size=1, max_size=5).map(" ".join)  # fmt: skip
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), _names, _bodies, st.integers(0, 3)),
        st.tuples(st.just("delete"), _names, st.just(""), st.just(0)),
    ),
    max_size=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_steps, query=_bodies)
def test_a_store_updated_file_by_file_ranks_exactly_like_a_fresh_one(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, str, int]], query: str
) -> None:
    base = tmp_path_factory.mktemp("prop")
    roots = MemoryRoots(project=base / "p", user=base / "u", state_dir=base / "s")
    (base / "p").mkdir()
    live = MemoryStore(roots, cache_dir=base / "cache-live")
    live.refresh()
    for kind, name, body, day in steps:
        path = base / "p" / "project" / f"{name}.md"
        if kind == "write":
            write(base / "p", f"project/{name}.md", body=body, mtime=T0 + day * DAY)
        elif path.exists():
            path.unlink()
        live.refresh()
    fresh = MemoryStore(roots, cache_dir=base / "cache-fresh")
    expected = [(hit.doc, hit.score) for hit in fresh.rank(query, limit=6)]
    assert [(hit.doc, hit.score) for hit in live.rank(query, limit=6)] == expected
    live.close()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryStore]:
    base = tmp_path_factory.mktemp("small")
    roots = MemoryRoots(project=base / "p", user=base / "u", state_dir=base / "s")
    write(base / "p", "project/a.md", name="发布流程", body="ledger payout retry 本番デプロイ")
    write(base / "u", "user/b.md", name="Ελληνικά café", body="ＡＢＣ uv pip")
    opened = MemoryStore(roots)
    opened.refresh()
    yield opened
    opened.close()


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(), limit=st.integers(-2, 5))
def test_any_query_text_ranks_without_error(
    small_store: MemoryStore, query: str, limit: int
) -> None:
    hits = small_store.rank(query, limit=limit)
    assert len(hits) <= max(limit, 0)
    assert all(hit.score > 0 for hit in hits)


_EMPTY_STORE_PROBE = """
import sys
from pathlib import Path
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.memory_store import MemoryStore
base = Path(sys.argv[1])
store = MemoryStore(MemoryRoots(base / "p" / "memory", base / "user", base / "p"))
store.warm()
assert store.rank("how do we deploy", limit=2) == []
print("regex" in sys.modules, "Stemmer" in sys.modules)
"""


def test_an_empty_store_never_loads_the_tokenizer(tmp_path: Path) -> None:
    """``regex`` costs ~15 ms to import, the stemmer ~1 ms: a session whose store is empty does
    without both."""
    out = subprocess.run(
        [sys.executable, "-c", _EMPTY_STORE_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False False"


def test_warming_a_store_with_memories_loads_the_stemmer(roots: MemoryRoots) -> None:
    from cairn.memory.store import tokenizer

    assert roots.project is not None
    write(roots.project, "project/deploy.md", description="how we deploy")
    tokenizer._stem.cache_clear()
    store = MemoryStore(roots)
    try:
        assert store.warm().docs == 1
        assert tokenizer._stem.cache_info().currsize == 1
    finally:
        store.close()


_ENGLISH_STORE_PROBE = """
import sys
from pathlib import Path
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.memory_store import MemoryStore
store = MemoryStore(MemoryRoots(*map(Path, sys.argv[1:4])))
store.warm()
english = [hit.doc.title for hit in store.rank("how do we deploy?", limit=2)]
before = "regex" in sys.modules
chinese = [hit.doc.title for hit in store.rank("部署 deploy", limit=2)]
print(english, before, chinese, "regex" in sys.modules)
"""


def test_an_english_prompt_ranks_without_loading_regex(roots: MemoryRoots) -> None:
    """Regression (issue #32): warming a store and ranking an English query imported ``regex``,
    ~50 M instructions before ``cairn -p``'s first request with memories; only non-ASCII text
    needs it, and a query with some is then tokenized by the pattern."""
    assert roots.project is not None
    write(roots.project, "project/deploy.md", name="deploy", description="how we deploy")
    write(roots.project, "project/other.md", name="other", description="release notes")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _ENGLISH_STORE_PROBE,
            *map(str, (roots.project, roots.user, roots.state_dir)),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "['deploy'] False ['deploy'] True"
