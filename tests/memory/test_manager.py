from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.content import Content
from cairn.memory.background.pending import read_pending
from cairn.memory.forget.selection import ForgetPlan
from cairn.memory.manager import MemoryManager
from cairn.memory.recall.query import RecallResult
from cairn.recording.recorder import ChatRecorder
from cairn.testing import RecordedRequest, Reply, ToolCallSpec, reply, tool_calls
from cairn.vocabulary.events import Notice

from .memory_helpers import Events, make_manager, project_root, write_memory
from .task_helpers import (
    ProjectFactory,
    agent_script,
    conversation,
    memory_file,
    new_project,
    writes,
    wrote_memory_turn,
)

__all__ = ["new_project"]  # the fixture, imported for pytest


@pytest.fixture
def events() -> Iterator[Events]:
    recorder = Events()
    yield recorder
    recorder.close()


@pytest.fixture
def manager(tmp_path: Path) -> MemoryManager:
    return make_manager(tmp_path)


def test_roots_follow_the_environment_given(manager: MemoryManager, tmp_path: Path) -> None:
    assert manager.roots.user == tmp_path / "home" / "memories"
    assert list(manager.root_map()) == ["project", "user"]


def test_enabled_follows_the_setting(tmp_path: Path) -> None:
    assert make_manager(tmp_path).enabled
    assert not make_manager(tmp_path, enabled=False).enabled


def test_a_disabled_manager_adds_nothing_to_the_system_prompt(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, enabled=False)
    write_memory(project_root(manager), "uv", description="Use uv")
    manager.reindex()
    assert manager.system_prompt_section() == ""


def test_the_prompt_section_holds_both_roots_and_the_index_contents(
    manager: MemoryManager,
) -> None:
    write_memory(project_root(manager), "uv", title="Use uv", description="Install with uv")
    manager.reindex()
    section = manager.system_prompt_section()
    assert section.startswith("# auto memory")
    assert str(project_root(manager)) in section and str(manager.roots.user) in section
    assert "- [Use uv](project/uv.md) — Install with uv" in section
    assert "## What not to save" in section


def test_the_prompt_section_is_condensed_while_memory_is_empty(manager: MemoryManager) -> None:
    section = manager.system_prompt_section()
    assert "memory is empty so far" in section
    assert "## What not to save" not in section


def test_memories_without_an_index_file_still_show_in_the_prompt(manager: MemoryManager) -> None:
    write_memory(project_root(manager), "uv", title="Use uv", description="Install with uv")
    assert not (project_root(manager) / "MEMORY.md").exists()
    assert "- [Use uv](project/uv.md)" in manager.system_prompt_section()


@pytest.mark.timeout(20)
def test_an_index_that_is_a_fifo_never_blocks_the_prompt_section(manager: MemoryManager) -> None:
    """Regression (#18): a FIFO at MEMORY.md hung the system prompt of every prompt."""
    write_memory(project_root(manager), "uv", title="Use uv", description="Install with uv")
    os.mkfifo(project_root(manager) / "MEMORY.md")
    assert "- [Use uv](project/uv.md) — Install with uv" in manager.system_prompt_section()


def test_reindex_writes_every_index_and_names_its_steps(manager: MemoryManager) -> None:
    write_memory(project_root(manager), "uv", title="Use uv", description="Install with uv")
    write_memory(manager.roots.user, "tz", type="user", title="Timezone", description="CET")
    steps: list[str] = []
    report = manager.reindex(on_step=steps.append)
    assert report.docs == 2
    assert steps == ["Reading memory files", "Writing MEMORY.md", "Saving the search index"]
    assert "Use uv" in (project_root(manager) / "MEMORY.md").read_text()
    assert "Timezone" in (manager.roots.user / "MEMORY.md").read_text()


@pytest.mark.parametrize(
    "reference",
    ["project/uv.md", "project:project/uv.md", "USE UV", "use"],
    ids=["relative-path", "scoped-path", "title-any-case", "title-part"],
)
def test_find_names_a_memory_by_path_or_title(manager: MemoryManager, reference: str) -> None:
    write_memory(project_root(manager), "uv", title="Use uv", description="Install with uv")
    (found,) = manager.find(reference)
    assert found.title == "Use uv"


def test_find_by_absolute_path(manager: MemoryManager) -> None:
    path = write_memory(project_root(manager), "uv", title="Use uv")
    assert [doc.path for doc in manager.find(str(path))] == [path]


def test_find_prefers_an_exact_title_to_partial_ones(manager: MemoryManager) -> None:
    write_memory(project_root(manager), "a", title="Deploy")
    write_memory(project_root(manager), "b", title="Deploy checklist")
    assert [doc.title for doc in manager.find("deploy")] == ["Deploy"]


def test_search_ranks_with_scores(manager: MemoryManager) -> None:
    write_memory(project_root(manager), "uv", title="Use uv", description="Install with uv")
    write_memory(project_root(manager), "lunch", title="Lunch", description="Fridays")
    (hit,) = manager.search("install with uv")
    assert hit.doc.title == "Use uv" and hit.score > 0


async def test_a_disabled_manager_recalls_nothing_and_records_nothing(
    tmp_path: Path, events: Events
) -> None:
    manager = make_manager(tmp_path, enabled=False)
    write_memory(project_root(manager), "uv", description="Use uv")
    result = await manager.recall(
        "uv", provider=None, excluded=frozenset(), recent_tools=(), abort=AbortController().signal
    )
    assert result == RecallResult()
    assert events.all == []


async def test_recall_renders_ages_with_the_manager_clock(manager: MemoryManager) -> None:
    three_days_ago = manager.clock() - 3 * 86_400
    write_memory(project_root(manager), "pnpm", description="Use pnpm", mtime=three_days_ago)
    result = await manager.recall(
        "pnpm", provider=None, excluded=frozenset(), recent_tools=(), abort=AbortController().signal
    )
    assert "Saved 3 days ago." in result.prompt


# --- background tasks: Extract scheduling, drain, the audit trail --------------------------

SESSION = "11111111-2222-3333-4444-555555555555"
OTHER_SESSION = "66666666-7777-8888-9999-000000000000"


def write_recording(path: Path, workspace: Path, text: str) -> None:
    """A session recording holding one prompt and its answer, as a session writes it."""
    recorder = ChatRecorder(path, session_id=SESSION, cwd=workspace, version="test")
    recorder.record_user(Content.user(text))
    recorder.record_assistant(Content.model("ok"), model="m", usage={})
    recorder.close()


async def test_three_quick_requests_make_two_runs_the_last_with_the_newest_history(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script("extract", reply("Nothing to save.", delay=0.3))
    one, two, three = "MESSAGE-ONE", "MESSAGE-TWO", "MESSAGE-THREE"
    histories = [conversation(one, "ok"), conversation(one, "ok", two, "ok"),
                 conversation(one, "ok", two, "ok", three, "ok")]  # fmt: skip

    for history in histories:
        project.manager.schedule_extract(
            project_root=project.workspace, session_id=SESSION, history=history,
            runtime=project.runtime,
        )  # fmt: skip
    assert await project.manager.drain(10)

    first, second = project.requests("extract")
    assert first.contains(one) and not first.contains(two)
    assert second.contains(three)
    statuses = [task.status for task in project.manager.recent_tasks()]
    assert statuses == ["completed", "superseded", "completed"]
    assert [e["status"] for e in project.named("memory.extract")] == ["completed", "completed"]


def looping_extractor(request: RecordedRequest) -> Reply | None:
    """An extraction agent that reads the same file over and over (loop protection stops it)."""
    if request.purpose != "extract":
        return None
    same = ToolCallSpec("read_file", {"file_path": "/nowhere/MEMORY.md"})
    return tool_calls(*[same] * 6)


async def test_an_extraction_that_fails_is_said_once_and_queued_for_the_next_one(
    new_project: ProjectFactory,
) -> None:
    """Issue 33: an Extract agent that ended in a loop left `-p` at "Saving memory…" with
    nothing more said, and the session was not queued for a later extraction."""
    project = new_project()
    project.server.handler = looping_extractor
    heard: list[tuple[str, object]] = []

    async def listen(session_id: str, event: object) -> None:
        heard.append((session_id, event))

    project.manager.add_change_listener(listen)  # type: ignore[arg-type]
    for text in ("MESSAGE-ONE", "MESSAGE-TWO"):
        project.manager.schedule_extract(
            project_root=project.workspace, session_id=SESSION,
            history=conversation(text, "ok"), runtime=project.runtime,
        )  # fmt: skip
        assert await project.manager.drain(30)

    notices = [event for _, event in heard if isinstance(event, Notice)]
    assert len(notices) == 1  # said once for the session, not once per failure
    assert notices[0].level == "warning" and notices[0].source == "memory"
    assert notices[0].text.startswith("Memory was not saved: the extraction agent")
    assert "loop" in notices[0].text
    assert read_pending(project.state, now=time.time()) == [SESSION]
    assert [task.status for task in project.manager.recent_tasks()] == ["failed", "failed"]


async def test_a_failed_extraction_is_retried_by_the_next_sessions_and_given_up_after(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = looping_extractor
    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=conversation("MESSAGE-ONE", "ok"), runtime=project.runtime,
    )  # fmt: skip
    assert await project.manager.drain(30)
    recording = project.runtime.chats_dir / f"{SESSION}.jsonl"
    write_recording(recording, project.workspace, "MESSAGE-ONE")

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=OTHER_SESSION,
        history=conversation("MESSAGE-TWO", "ok"), runtime=project.runtime,
    )  # fmt: skip
    assert await project.manager.drain(30)

    retried = [r for r in project.requests("extract") if r.session_id == SESSION]
    assert any(r.contains("MESSAGE-ONE") for r in retried[1:])
    assert SESSION not in read_pending(project.state, now=time.time())  # failed again: given up

async def test_requests_from_two_folders_of_one_memory_share_its_one_extraction(
    new_project: ProjectFactory,
) -> None:
    """Regression: the extraction slot was keyed by the project root a session gave, so a
    session started in a sub-folder ran a second extraction of the same memory alongside the
    first; the scheduler's state is the memory space's now."""
    project = new_project()
    project.server.handler = agent_script("extract", reply("Nothing to save.", delay=0.3))
    subfolder = project.workspace / "src"
    subfolder.mkdir()
    for root, said, session in ((project.workspace, "FROM-THE-ROOT", SESSION),
                                (subfolder, "FROM-SRC", OTHER_SESSION)):  # fmt: skip
        project.manager.schedule_extract(
            project_root=root, session_id=session, history=conversation(said, "ok"),
            runtime=project.runtime,
        )  # fmt: skip
    assert await project.manager.drain(10)

    first, second = project.requests("extract")
    assert first.contains("FROM-THE-ROOT") and second.contains("FROM-SRC")
    # One after the other: the second was sent only once the first, answered 0.3 s after it
    # arrived, was over (side by side, both arrive at once).
    assert second.received_at - first.received_at >= 0.3

async def test_scheduling_returns_before_the_extraction_finishes(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script("extract", reply("Nothing.", delay=1.0))

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=conversation("hello", "hi"), runtime=project.runtime,
    )  # fmt: skip

    assert not await project.manager.drain(0.2)
    assert await project.manager.drain(10)


async def test_a_turn_that_wrote_memory_itself_is_not_extracted(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    target = project.memory / "feedback" / "tabs.md"
    target.parent.mkdir(parents=True)
    target.write_text(memory_file("Tabs", "Use tabs."))

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=wrote_memory_turn(target), runtime=project.runtime,
    )  # fmt: skip
    assert await project.manager.drain(10)

    assert project.requests("extract") == []
    [task] = project.manager.recent_tasks()
    assert (task.status, task.skipped_reason) == ("skipped", "memory_tool")
    assert project.named("memory.extract")[0]["skipped_reason"] == "memory_tool"
    assert "- [Tabs](feedback/tabs.md)" in (project.memory / "MEMORY.md").read_text()
    [entry], _ = project.manager.history()
    assert (entry.operation, entry.files) == ("remember", ["feedback/tabs.md"])


def forgotten_tabs(root: Path, *, at: float) -> None:
    from cairn.memory.forget.tombstones import Statement, Tombstone, add_tombstones

    tabs = Statement("Tabs", "Tabs", "Use tabs.")
    add_tombstones(
        root, [Tombstone.of(tabs, id="t:0", forgotten_at=at, scope="project", relative_path="x")]
    )


async def test_a_write_around_the_memory_guard_stating_a_forgotten_fact_goes_to_the_trash(
    new_project: ProjectFactory,
) -> None:
    """Regression: a memory the turn's own agent wrote past the memory guard (its write was
    not recorded) was indexed and lifted the tombstone of the fact it stated again, though no
    user message restated it: the forgotten fact was back, for Recall and for Extract."""
    from cairn.memory.forget.tombstones import read_tombstones

    project = new_project()
    forgotten_tabs(project.memory, at=time.time() - 60)
    target = project.memory / "feedback" / "tabs.md"
    target.parent.mkdir(parents=True)
    target.write_text(memory_file("Tabs", "Use tabs."))
    told: list[tuple[str, object]] = []

    async def listen(session_id: str, change: object) -> None:
        told.append((session_id, change))

    project.manager.add_change_listener(listen)

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=wrote_memory_turn(target, text="let's fix the parser"), runtime=project.runtime,
    )  # fmt: skip
    assert await project.manager.drain(10)

    assert not target.exists()
    [trashed] = (project.memory / ".trash").glob("*/feedback/tabs.md")
    assert memory_file("Tabs", "Use tabs.") == trashed.read_text()
    assert [t.id for t in read_tombstones(project.memory)] == ["t:0"]
    assert "Tabs" not in (project.memory / "MEMORY.md").read_text()
    [entry], _ = project.manager.history()
    assert (entry.operation, entry.files) == ("remember", ["feedback/tabs.md"])
    assert entry.detail.startswith("moved to the trash: the user asked to forget this on ")
    [(session_id, notice)] = told
    assert session_id == SESSION and isinstance(notice, Notice)
    assert "moved to the trash" in notice.text and "cairn memory restore" in notice.text

    assert project.manager.restore_last_forget().ok  # restorable, as the notice says
    assert target.read_text() == memory_file("Tabs", "Use tabs.")


async def test_a_write_around_the_memory_guard_of_a_fact_the_user_stated_again_is_kept(
    new_project: ProjectFactory,
) -> None:
    from cairn.memory.forget.tombstones import read_tombstones

    project = new_project()
    forgotten_tabs(project.memory, at=time.time() - 60)
    target = project.memory / "feedback" / "tabs.md"
    target.parent.mkdir(parents=True)
    target.write_text(memory_file("Tabs", "Use tabs."))

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=wrote_memory_turn(target, text="I use tabs, keep it"), runtime=project.runtime,
        said=[(time.time() - 120, "I use tabs."), (time.time(), "I use tabs, keep it")],
    )  # fmt: skip
    assert await project.manager.drain(10)

    assert target.exists() and read_tombstones(project.memory) == []
    assert "- [Tabs](feedback/tabs.md)" in (project.memory / "MEMORY.md").read_text()
    [entry], _ = project.manager.history()
    assert entry.detail == "stated again after a forget: Tabs"


async def test_a_write_around_the_memory_guard_in_a_remember_turn_lifts_the_tombstone(
    new_project: ProjectFactory,
) -> None:
    from cairn.memory.forget.tombstones import read_tombstones

    project = new_project()
    forgotten_tabs(project.memory, at=time.time() - 60)
    target = project.memory / "feedback" / "tabs.md"
    target.parent.mkdir(parents=True)
    target.write_text(memory_file("Tabs", "Use tabs."))

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=wrote_memory_turn(target), runtime=project.runtime, asked=True,
    )  # fmt: skip
    assert await project.manager.drain(10)

    assert target.exists() and read_tombstones(project.memory) == []


async def test_a_rejected_memory_write_does_not_skip_extraction(
    new_project: ProjectFactory,
) -> None:
    project = new_project()

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=wrote_memory_turn(project.memory / "feedback" / "x.md", error=True),
        runtime=project.runtime,
    )  # fmt: skip
    assert await project.manager.drain(10)

    assert len(project.requests("extract")) == 1


async def test_extract_telemetry_names_the_touched_topics(new_project: ProjectFactory) -> None:
    project = new_project()
    path = str(project.memory / "feedback" / "pytest.md")
    project.server.handler = agent_script("extract", writes((path, memory_file("Pytest", "x"))))

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=conversation("I use pytest.", "ok"), runtime=project.runtime,
    )  # fmt: skip
    assert await project.manager.drain(10)

    [event] = project.named("memory.extract")
    assert event["trigger"] == "auto" and event["status"] == "completed"
    assert (event["patches_count"], event["touched_topics"]) == (1, "feedback")
    assert event["duration_ms"] > 0
    assert project.manager.generation == 1


async def test_nothing_is_scheduled_while_managed_memory_is_off(
    new_project: ProjectFactory,
) -> None:
    project = new_project(memory={"enableManagedAutoMemory": False})

    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION,
        history=conversation("I use pytest.", "ok"), runtime=project.runtime,
    )  # fmt: skip
    project.manager.schedule_dream(
        project_root=project.workspace, session_id=SESSION, runtime=project.runtime
    )

    assert await project.manager.drain(1)
    assert project.manager.recent_tasks() == []


async def test_forget_and_restore_are_recorded_in_the_audit_trail(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    path = project.memory / "feedback" / "tabs.md"
    path.parent.mkdir(parents=True)
    path.write_text(memory_file("Tabs", "Use tabs."))
    [candidate] = project.manager.forget_candidates()

    project.manager.apply_forget(ForgetPlan("tabs", [candidate], "heuristic"), session_id=SESSION)
    project.manager.restore_last_forget()

    restored, forgotten = project.manager.history()[0]
    assert (forgotten.operation, forgotten.files, forgotten.session_id) == (
        "forget", ["feedback/tabs.md"], SESSION,
    )  # fmt: skip
    assert (restored.operation, restored.files) == ("restore", ["feedback/tabs.md"])
    assert path.exists()
