"""Dream's automatic gates (with an injected clock) and the consolidation lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.memory.background.dream.gates import count_new_sessions
from cairn.memory.background.meta import write_meta
from cairn.memory.background.state_files import iso_time
from cairn.testing import reply

from ...task_helpers import (
    HOUR,
    NOW,
    Project,
    ProjectFactory,
    agent_script,
    new_project,
    write_memory,
)

__all__ = ["new_project"]

pytestmark = pytest.mark.timeout(30)

SESSION = "11111111-2222-3333-4444-555555555555"
DREAM_EVENT = "memory.dream"


def a_memory(project: Project) -> None:
    """Something to consolidate: with no project memories a Dream skips before the model."""
    write_memory(project.memory, "feedback/tabs.md", "Tabs", "Indent with tabs.")


def dream_ready(project: Project, *, last_dream: float | None = None, sessions: int = 5) -> None:
    """Meta, recordings and a memory to consolidate, so that every automatic gate passes."""
    a_memory(project)
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
    dream_ready(project)
    write_meta(project.state, {"lastDreamAt": "yesterday-ish"}, now=NOW)

    assert await auto_dream(project) is None


async def test_the_recordings_are_scanned_at_most_every_10_minutes(
    new_project: ProjectFactory,
) -> None:
    now = [NOW]
    project = new_project(clock=lambda: now[0])
    a_memory(project)
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
    a_memory(project)
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
    a_memory(project)
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
