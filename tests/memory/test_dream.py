"""Dream: its gates (with an injected clock), the consolidation lock, the operations manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.memory.dream import (
    OPERATIONS_FILE_NAME,
    DreamOperations,
    DreamReport,
    ManifestRejected,
    apply_manifest,
    count_new_sessions,
    validate_manifest,
)
from cairn.memory.history import read_history
from cairn.memory.meta import write_meta
from cairn.memory.state_files import iso_time
from cairn.testing import reply, tool_call

from .task_helpers import (
    HOUR,
    NOW,
    Project,
    ProjectFactory,
    agent_script,
    memory_file,
    new_project,
    write_memory,
    writes,
)

__all__ = ["new_project"]

pytestmark = pytest.mark.timeout(30)

SESSION = "11111111-2222-3333-4444-555555555555"
DREAM_EVENT = "memory.dream"


def dream_ready(project: Project, *, last_dream: float | None = None, sessions: int = 5) -> None:
    """Meta and recordings so that every automatic gate passes."""
    if last_dream is not None:
        write_meta(project.state, {"lastDreamAt": iso_time(last_dream)}, now=NOW)
    project.session_files(sessions)


async def auto_dream(project: Project, session: str = SESSION) -> str | None:
    """Schedule an automatic Dream, wait for it, and return why it was skipped (None: it ran)."""
    project.manager.schedule_dream(
        project_root=project.workspace, session_id=session, runtime=project.runtime
    )
    assert await project.manager.drain(10)
    record = project.manager.recent_tasks()[-1]
    assert record.kind == "dream"
    return record.skipped_reason if record.status == "skipped" else None


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


# --- the automatic gates, in order -------------------------------------------------------------


async def test_every_gate_passes_and_the_dreamer_runs(new_project: ProjectFactory) -> None:
    project = new_project(clock=lambda: NOW)
    dream_ready(project, last_dream=NOW - 25 * HOUR)

    assert await auto_dream(project) is None

    [request] = project.requests("dream")
    assert request.session_id == SESSION
    meta = json.loads((project.state / "meta.json").read_text())
    assert meta["lastDreamAt"] == iso_time(NOW) and meta["lastDreamSessionId"] == SESSION


async def test_dream_is_skipped_when_disabled(new_project: ProjectFactory) -> None:
    project = new_project(clock=lambda: NOW, memory={"enableManagedAutoDream": False})
    dream_ready(project)

    assert await auto_dream(project) == "disabled"
    assert project.requests("dream") == []


async def test_dream_is_skipped_under_memory_pressure(new_project: ProjectFactory) -> None:
    project = new_project(clock=lambda: NOW, memory={"minAvailableMemoryMb": 10**9})
    dream_ready(project)

    assert await auto_dream(project) == "memory_pressure"


async def test_dream_is_skipped_for_the_session_of_the_last_dream(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW)
    dream_ready(project)
    write_meta(project.state, {"lastDreamSessionId": SESSION}, now=NOW)

    assert await auto_dream(project) == "same_session"


async def test_dream_waits_24_hours_after_the_last_one(new_project: ProjectFactory) -> None:
    project = new_project(clock=lambda: NOW)
    dream_ready(project, last_dream=NOW - 23 * HOUR)

    assert await auto_dream(project) == "min_hours"


async def test_an_unparsable_last_dream_time_passes_the_hours_gate(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW)
    project.session_files(5)
    write_meta(project.state, {"lastDreamAt": "yesterday-ish"}, now=NOW)

    assert await auto_dream(project) is None


async def test_the_recordings_are_scanned_at_most_every_10_minutes(
    new_project: ProjectFactory,
) -> None:
    now = [NOW]
    project = new_project(clock=lambda: now[0])
    project.session_files(2)

    assert await auto_dream(project) == "min_sessions"
    now[0] += 9 * 60
    assert await auto_dream(project) == "scan_throttled"
    project.session_files(3)
    now[0] += 2 * 60
    assert await auto_dream(project) is None


async def test_dream_needs_5_new_recordings_besides_this_session(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW)
    project.session_files(4)
    own = project.runtime.chats_dir / f"{SESSION}.jsonl"
    own.write_text("{}\n")

    assert await auto_dream(project) == "min_sessions"


def test_only_recordings_newer_than_the_last_dream_count(tmp_path: Path) -> None:
    for name, mtime in (("a" * 32, 100.0), ("b" * 32, 300.0), ("c" * 36, 400.0)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("")
        os.utime(path, (mtime, mtime))
    (tmp_path / "notes.jsonl").write_text("")

    assert count_new_sessions(tmp_path, since=200.0, exclude_session="c" * 36) == 1


async def test_dream_is_skipped_while_another_process_holds_the_lock(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW)
    dream_ready(project)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        project.state.mkdir(parents=True, exist_ok=True)
        (project.state / "consolidation.lock").write_text(f"{holder.pid}\n")

        assert await auto_dream(project) == "locked"
    finally:
        holder.kill()
        holder.wait()
    assert project.requests("dream") == []


async def test_dream_is_skipped_while_one_already_runs_in_this_process(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW)
    dream_ready(project)
    project.server.handler = agent_script("dream", reply("Nothing to do.", delay=1.0))
    manual = project.runtime.spawn(
        project.manager.run_dream_now(session_id="manual", runtime=project.runtime), name="t"
    )
    await project.server.async_wait_for_requests(1, purpose="dream")
    (project.state / "consolidation.lock").unlink()  # only the in-process record remains

    assert await auto_dream(project) == "running"
    await manual


# --- the consolidation lock ----------------------------------------------------------------


async def test_a_lock_left_by_a_dead_process_is_removed_and_dream_runs(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW)
    dream_ready(project)
    project.state.mkdir(parents=True, exist_ok=True)
    (project.state / "consolidation.lock").write_text(f"{dead_pid()}\n")

    assert await auto_dream(project) is None
    assert not (project.state / "consolidation.lock").exists()


async def test_a_lock_older_than_an_hour_is_stale_even_with_a_live_pid(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW)
    dream_ready(project)
    lock = project.state / "consolidation.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(f"{os.getppid()}\n")
    old = time.time() - 2 * HOUR
    os.utime(lock, (old, old))

    assert await auto_dream(project) is None


async def test_the_lock_holds_our_pid_while_dreaming_and_is_released(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    seen: list[str] = []

    def first(request: Any) -> Any:
        seen.append((project.state / "consolidation.lock").read_text().strip())
        return reply("Nothing to consolidate.")

    project.server.handler = agent_script("dream", first)

    await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    assert seen == [str(os.getpid())]
    assert not (project.state / "consolidation.lock").exists()


async def test_a_manual_dream_skips_the_gates_but_not_the_lock(
    new_project: ProjectFactory,
) -> None:
    project = new_project(clock=lambda: NOW, memory={"enableManagedAutoDream": False})
    meta = {"lastDreamAt": iso_time(NOW), "lastDreamSessionId": SESSION}
    write_meta(project.state, meta, now=NOW)

    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    assert report.status == "noop" and len(project.requests("dream")) == 1
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (project.state / "consolidation.lock").write_text(f"{holder.pid}\n")
        locked = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)
    finally:
        holder.kill()
        holder.wait()
    assert locked.status == "skipped" and "already running" in str(locked)


# --- what the dreamer does -------------------------------------------------------------------


async def test_a_dream_merges_duplicates_and_applies_the_manifest(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    write_memory(project.memory, "feedback/tabs.md", "Tabs", "Indent with tabs.")
    write_memory(project.memory, "feedback/tabs-again.md", "Tabs again", "Use tabs.")
    merged = project.memory / "feedback" / "indentation.md"
    operations = {
        "version": 1,
        "delete": ["feedback/tabs.md", "feedback/tabs-again.md"],
        "operations": [
            {"type": "dedupe", "sources": ["feedback/tabs.md", "feedback/tabs-again.md"],
             "target": "feedback/indentation.md"},
        ],
    }  # fmt: skip
    project.server.handler = agent_script(
        "dream",
        writes(
            (str(merged), memory_file("Indentation", "Indent with tabs, never spaces.")),
            (str(project.memory / OPERATIONS_FILE_NAME), json.dumps(operations)),
        ),
        "Merged two tab memories.",
    )
    steps: list[str] = []

    async def progress(text: str) -> None:
        steps.append(text)

    report = await project.manager.run_dream_now(
        session_id=SESSION, runtime=project.runtime, progress=progress
    )

    assert report.status == "updated"
    assert (report.created, report.deleted, report.deduped) == (
        ["feedback/indentation.md"], ["feedback/tabs.md", "feedback/tabs-again.md"], 2,
    )  # fmt: skip
    assert sorted(p.name for p in (project.memory / "feedback").iterdir()) == ["indentation.md"]
    assert not (project.memory / OPERATIONS_FILE_NAME).exists()
    index = (project.memory / "MEMORY.md").read_text()
    assert "indentation.md" in index and "tabs.md" not in index
    assert any("Write" in step for step in steps)
    assert "1 created" in str(report) and "Merged two tab memories." in str(report)
    [entry], _ = read_history([("project", project.memory)])
    assert entry.operation == "dream" and len(entry.files) == 3


async def test_an_invalid_manifest_deletes_nothing_and_is_removed(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    keep = write_memory(project.memory, "feedback/keep.md", "Keep", "Keep me.")
    project.server.handler = agent_script(
        "dream",
        writes(
            (
                str(project.memory / OPERATIONS_FILE_NAME),
                json.dumps({"version": 1, "delete": ["feedback/keep.md", "../outside.md"]}),
            )
        ),
    )

    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    assert keep.exists()
    assert report.manifest_error is not None and ".." in report.manifest_error
    assert not (project.memory / OPERATIONS_FILE_NAME).exists()
    assert "not applied" in str(report)


async def test_the_dreamer_reads_transcripts_but_cannot_write_user_memory(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    chats = project.runtime.chats_dir
    chats.mkdir(parents=True)
    (chats / f"{SESSION}.jsonl").write_text('{"text": "we moved to Postgres 16"}\n')
    user_file = project.user_memory / "user" / "me.md"
    replies = iter(
        [
            tool_call("read_file", {"file_path": str(chats / f"{SESSION}.jsonl")}),
            writes((str(user_file), memory_file("Me", "x", type="user"))),
            reply("Done."),
        ]
    )
    project.server.handler = lambda r: next(replies) if r.purpose == "dream" else None

    await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    second, third = project.requests("dream")[1:]
    assert "Postgres 16" in json.dumps(second.messages)
    assert not user_file.exists()
    assert "outside the allowed directories" in json.dumps(third.messages)


def test_a_report_reads_as_a_summary() -> None:
    report = DreamReport("updated", created=["a.md"], updated=["b.md"], duration_s=1.25)
    assert str(report).startswith("Dream finished: 1 created, 1 updated, 0 deleted (1.2 s).")
    assert str(DreamReport("noop")).startswith("Dream finished: no changes")


# --- manifest validation, rule by rule -----------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    for name in ("a", "b", "c", "t", "u"):
        write_memory(root, f"feedback/{name}.md", name.upper())
    write_memory(root, "pinned/p.md", "P")
    (root / "feedback" / "broken.md").write_text("no front matter\n")
    return root


def rejected(data: Any, root: Path) -> str:
    with pytest.raises(ManifestRejected) as caught:
        validate_manifest(data, root)
    return str(caught.value)


def test_a_valid_manifest_lists_its_deletions(root: Path) -> None:
    data = {
        "version": 1,
        "delete": ["feedback/a.md", "feedback/b.md", "feedback/c.md"],
        "operations": [
            {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/t.md"},
            {"type": "split", "source": "feedback/b.md",
             "targets": ["feedback/t.md", "feedback/u.md"]},
        ],
    }  # fmt: skip
    operations = validate_manifest(data, root)
    assert operations.delete == ["feedback/a.md", "feedback/b.md", "feedback/c.md"]
    assert (operations.deduped, operations.split) == (1, 1)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd.md", "relative POSIX"),
        ("feedback\\a.md", "relative POSIX"),
        ("feedback/../feedback/a.md", "'..'"),
        ("feedback//a.md", "empty"),
        ("feedback/a.txt", ".md"),
        ("MEMORY.md", "generated"),
        ("pinned/p.md", "protected"),
        ("feedback/missing.md", "no such"),
    ],
)
def test_each_path_rule_rejects_the_whole_manifest(root: Path, path: str, why: str) -> None:
    assert why in rejected({"version": 1, "delete": ["feedback/a.md", path]}, root)


def test_a_symlinked_segment_is_rejected(root: Path) -> None:
    (root / "alias").symlink_to(root / "feedback")
    assert "symlink" in rejected({"delete": ["alias/a.md"]}, root)


def test_a_path_resolving_outside_the_root_is_rejected(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    write_memory(tmp_path / "elsewhere", "feedback/x.md", "X")
    (root / "project").symlink_to(tmp_path / "elsewhere" / "feedback")
    assert "symlink" in rejected({"delete": ["project/x.md"]}, root)


def test_a_duplicate_delete_is_rejected(root: Path) -> None:
    assert "twice" in rejected({"delete": ["feedback/a.md", "feedback/a.md"]}, root)


def test_a_dedupe_target_must_exist_be_valid_and_survive(root: Path) -> None:
    def dedupe(target: str, delete: list[str]) -> str:
        operation = {"type": "dedupe", "sources": ["feedback/a.md"], "target": target}
        return rejected({"delete": delete, "operations": [operation]}, root)

    assert "no such" in dedupe("feedback/nope.md", ["feedback/a.md"])
    assert "not a valid memory" in dedupe("feedback/broken.md", ["feedback/a.md"])
    assert "is deleted" in dedupe("feedback/t.md", ["feedback/a.md", "feedback/t.md"])


def test_a_dedupe_source_must_be_deleted_and_differ_from_the_target(root: Path) -> None:
    not_deleted = {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/t.md"}
    assert "must also be in delete" in rejected({"operations": [not_deleted]}, root)
    itself = {"type": "dedupe", "sources": ["feedback/t.md"], "target": "feedback/t.md"}
    assert "also the target" in rejected({"delete": [], "operations": [itself]}, root)


def test_a_source_claimed_by_two_operations_is_rejected(root: Path) -> None:
    one = {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/t.md"}
    two = {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/u.md"}
    data = {"delete": ["feedback/a.md"], "operations": [one, two]}
    assert "two operations" in rejected(data, root)


def test_split_targets_must_be_two_unique_surviving_memories(root: Path) -> None:
    def split(targets: list[str], delete: list[str] | None = None) -> str:
        operation = {"type": "split", "source": "feedback/a.md", "targets": targets}
        return rejected({"delete": delete or ["feedback/a.md"], "operations": [operation]}, root)

    assert "at least two" in split(["feedback/t.md"])
    assert "twice" in split(["feedback/t.md", "feedback/t.md"])
    both = ["feedback/a.md", "feedback/b.md"]
    assert "is deleted" in split(["feedback/t.md", "feedback/b.md"], both)
    assert "no such" in split(["feedback/t.md", "feedback/new.md"])
    assert "also a target" in split(["feedback/a.md", "feedback/t.md"])


def test_unknown_operations_shapes_and_versions_are_rejected(root: Path) -> None:
    assert "unknown operation" in rejected({"operations": [{"type": "rename"}]}, root)
    assert "JSON object" in rejected(["feedback/a.md"], root)
    assert "version" in rejected({"version": 2}, root)
    assert "must be a list" in rejected({"delete": "feedback/a.md"}, root)


def test_applying_a_valid_manifest_deletes_its_files_and_removes_it(root: Path) -> None:
    manifest = {"version": 1, "delete": ["feedback/c.md"]}
    (root / OPERATIONS_FILE_NAME).write_text(json.dumps(manifest))

    operations, problem = apply_manifest(root)

    assert problem is None and operations.delete == ["feedback/c.md"]
    assert not (root / "feedback" / "c.md").exists()
    assert not (root / OPERATIONS_FILE_NAME).exists()


def test_a_manifest_that_is_not_json_is_rejected_and_removed(root: Path) -> None:
    (root / OPERATIONS_FILE_NAME).write_text("delete everything")

    operations, problem = apply_manifest(root)

    assert operations.delete == [] and problem is not None and "not valid JSON" in problem
    assert not (root / OPERATIONS_FILE_NAME).exists()
    assert (root / "feedback" / "a.md").exists()


def test_no_manifest_means_no_deletions(root: Path) -> None:
    assert apply_manifest(root) == (DreamOperations(), None)
