"""The main agent's memory writes: ``/remember`` and memories the model saves itself.

Real sessions on a runtime talking to the scripted model server; what is observed is the
memory folder on disk, the audit trail, the events the session emits and the permission
requests its front end got.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cairn.memory.store.history import read_history
from cairn.memory.store.locks import root_lock_path
from cairn.session.session import PromptRequest, Session
from cairn.testing import RecordedRequest, Reply, reply, tool_call
from cairn.vocabulary.events import (
    MemoryChanged,
    MemoryRecalled,
    SessionEvent,
    ToolCallUpdate,
    TurnResult,
)
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest, Question

from .memory_helpers import unstamped
from .task_helpers import Project, ProjectFactory, memory_file, new_project, tool_messages

__all__ = ["new_project"]

pytestmark = pytest.mark.timeout(30)

UV = memory_file("Prefers uv over pip", "Use uv pip install.", type="feedback",
                 description="The user installs Python packages with uv, never pip")  # fmt: skip


class Person:
    """A front end whose user answers every permission request with ``answer``."""

    interactive = True

    def __init__(self, answer: PermissionOutcome = "reject") -> None:
        self.answer: PermissionOutcome = answer
        self.asked: list[PermissionRequest] = []

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        self.asked.append(request)
        return self.answer

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        return None


def main_agent(*replies: Reply) -> Any:
    """The main conversation's replies in order (by how many tool results it has seen)."""

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose != "main":
            return None
        step = len([m for m in request.messages if m.get("role") == "tool"])
        return replies[min(step, len(replies) - 1)]

    return handle


def write(path: Path, content: str) -> Reply:
    return tool_call("write_file", {"file_path": str(path), "content": content})


async def run(session: Session, text: str) -> tuple[TurnResult, list[SessionEvent]]:
    events: list[SessionEvent] = []

    async def sink(event: SessionEvent) -> None:
        events.append(event)

    result = await session.prompt(PromptRequest(text), sink)
    return result, events


def session_of(project: Project, person: Person) -> Session:
    return project.runtime.new_session(frontend=person, approval_mode="default")


async def test_remember_saves_a_memory_without_asking_and_indexes_it(
    new_project: ProjectFactory,
) -> None:
    """Regression (#16): /remember's write was approved, then refused as outside the allowed
    directories: the main agent could not write into the memory folders at all."""
    project = new_project()
    target = project.user_memory / "feedback" / "prefer-uv.md"
    project.server.handler = main_agent(write(target, UV), reply("Saved it."))
    person = Person("reject")  # a dialog would refuse: the write must not ask
    session = session_of(project, person)
    manager = project.runtime.memory_manager()

    result, events = await run(session, "/remember I prefer uv over pip")
    assert await manager.drain(10)

    assert result.stop_reason == "end_turn" and result.text == "Saved it."
    assert person.asked == []
    assert unstamped(target.read_text()) == UV
    [main, follow_up] = project.requests("main")
    assert str(project.user_memory) in main.last_user_text()
    assert tool_messages(follow_up) and "Created" in tool_messages(follow_up)[0]
    assert (
        "- [Prefers uv over pip](feedback/prefer-uv.md)"
        in (project.user_memory / "MEMORY.md").read_text()
    )
    [entry], _ = read_history([("user", project.user_memory)])
    assert (entry.operation, entry.files, entry.session_id) == (
        "remember", ["feedback/prefer-uv.md"], session.id,
    )  # fmt: skip
    [change] = [e for e in events if isinstance(e, MemoryChanged)]
    assert change.operation == "remember" and [r.name for r in change.saved] == [
        "Prefers uv over pip"
    ]
    assert change.saved[0].path == str(target.resolve())
    assert project.requests("extract") == []  # the turn saved memory itself
    assert manager.recent_tasks()[-2].skipped_reason == "memory_tool"
    await session.close()


async def test_a_saved_memory_whose_index_cannot_be_rebuilt_says_so_to_the_model(
    new_project: ProjectFactory,
) -> None:
    """Regression: when indexing after a /remember write failed, its tool result was copied
    with dataclasses.replace, which a ToolResult (a Value class) refuses: the model was told
    "write_file failed unexpectedly" instead of "saved, but the index was not rebuilt"."""
    project = new_project()
    target = project.user_memory / "feedback" / "prefer-uv.md"
    root_lock_path(project.memory).mkdir(parents=True)  # the project root cannot be locked
    project.server.handler = main_agent(write(target, UV), reply("Saved it."))
    session = session_of(project, Person("reject"))

    result, _ = await run(session, "/remember I prefer uv over pip")

    assert result.stop_reason == "end_turn" and result.text == "Saved it."
    assert unstamped(target.read_text()) == UV
    [_, follow_up] = project.requests("main")
    [message] = tool_messages(follow_up)
    assert "Created" in message and "(the memory index was not rebuilt: " in message
    await session.close()


async def test_a_remembered_memory_is_recalled_in_a_new_session(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    target = project.user_memory / "feedback" / "prefer-uv.md"
    project.server.handler = main_agent(write(target, UV), reply("Saved it."))
    first = session_of(project, Person())
    await run(first, "/remember I prefer uv over pip")
    await first.close()

    project.server.handler = main_agent(reply("Use uv pip install."))
    second = session_of(project, Person())
    _, events = await run(second, "how do I install Python packages with pip?")

    main = project.requests("main")[-1]
    assert "Use uv pip install." in json.dumps(main.messages)  # the memory's body, recalled
    [recalled] = [e for e in events if isinstance(e, MemoryRecalled)]
    assert [ref.name for ref in recalled.memories] == ["Prefers uv over pip"]
    assert recalled.phase == "fast"
    await second.close()


async def test_a_memory_write_without_front_matter_is_refused_and_nothing_written(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    target = project.user_memory / "feedback" / "prefer-uv.md"
    project.server.handler = main_agent(write(target, "uv, not pip"), reply("Sorry."))
    session = session_of(project, Person())

    _, events = await run(session, "/remember I prefer uv over pip")

    assert not target.exists()
    [follow_up] = project.requests("main")[1:]
    [message] = tool_messages(follow_up)
    assert "was not saved: no '---' front matter block" in message
    assert "name: <short title>" in message  # how to write one
    assert not [e for e in events if isinstance(e, MemoryChanged)]
    await session.close()


async def test_outside_a_remember_turn_a_memory_write_is_approved_like_any_edit(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    target = project.memory / "project" / "deploys.md"
    content = memory_file("Deploys on Tuesdays", "We deploy on Tuesdays.", type="project")
    project.server.handler = main_agent(write(target, content), reply("Noted."))
    person = Person("allow_once")
    session = session_of(project, person)

    _, events = await run(session, "note that we deploy on Tuesdays")

    [request] = person.asked
    assert request.tool_name == "write_file" and request.diff is not None
    assert request.diff.new_text == content  # the dialog shows what will be saved
    assert unstamped(target.read_text()) == content
    [change] = [e for e in events if isinstance(e, MemoryChanged)]
    assert [r.relative_path for r in change.saved] == ["project/deploys.md"]
    await session.close()


async def test_a_declined_memory_write_writes_nothing(new_project: ProjectFactory) -> None:
    project = new_project()
    target = project.memory / "project" / "deploys.md"
    content = memory_file("Deploys", "We deploy on Tuesdays.", type="project")
    project.server.handler = main_agent(write(target, content), reply("OK."))
    session = session_of(project, Person("reject"))

    await run(session, "note that we deploy on Tuesdays")

    assert not target.exists()
    await session.close()


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("pinned/keep.md", "protected and read-only"),
        ("MEMORY.md", "generated from the memory files"),
        ("feedback/notes.txt", "only Markdown memory files"),
    ],
)
async def test_remember_never_writes_the_index_pinned_or_other_files(
    new_project: ProjectFactory, relative: str, why: str
) -> None:
    project = new_project()
    target = project.user_memory / relative
    project.server.handler = main_agent(write(target, UV), reply("Hm."))
    session = session_of(project, Person())

    await run(session, "/remember I prefer uv over pip")

    assert not target.exists()
    [message] = tool_messages(project.requests("main")[1])
    assert why in message
    await session.close()


async def test_remember_gives_no_write_access_beyond_the_workspace_and_memory(
    new_project: ProjectFactory, tmp_path: Path
) -> None:
    project = new_project()
    elsewhere = tmp_path / "elsewhere" / "notes.md"
    project.server.handler = main_agent(write(elsewhere, UV), reply("Hm."))
    session = session_of(project, Person("allow_once"))

    await run(session, "/remember I prefer uv over pip")

    assert not elsewhere.exists()
    [message] = tool_messages(project.requests("main")[1])
    assert "outside the allowed directories" in message
    await session.close()


async def test_overwriting_an_existing_memory_needs_reading_it_first(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    target = project.user_memory / "feedback" / "prefer-uv.md"
    target.parent.mkdir(parents=True)
    target.write_text(memory_file("Prefers uv", "Use uv.", type="feedback"))
    updated = memory_file("Prefers uv", "Use uv; never pip, never conda.", type="feedback")
    project.server.handler = main_agent(
        write(target, updated),
        tool_call("read_file", {"file_path": str(target)}),
        write(target, updated),
        reply("Updated."),
    )
    session = session_of(project, Person())

    _, events = await run(session, "/remember never conda either")

    messages = tool_messages(project.requests("main")[-1])
    assert "has not been read by you" in messages[0]
    assert unstamped(target.read_text()) == updated
    [change] = [e for e in events if isinstance(e, MemoryChanged)]
    assert [r.name for r in change.updated] == ["Prefers uv"] and change.saved == ()
    await session.close()


async def test_the_memory_change_follows_the_tool_result_in_the_event_stream(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    target = project.user_memory / "feedback" / "prefer-uv.md"
    project.server.handler = main_agent(write(target, UV), reply("Saved it."))
    session = session_of(project, Person())

    _, events = await run(session, "/remember I prefer uv over pip")

    kinds = [type(e).__name__ for e in events if isinstance(e, MemoryChanged | ToolCallUpdate)]
    assert kinds[-1] == "MemoryChanged" and "ToolCallUpdate" in kinds
    await session.close()


async def test_remember_of_a_forgotten_fact_saves_it_and_lifts_its_tombstone(
    new_project: ProjectFactory,
) -> None:
    """The user's explicit word brings a forgotten fact back: Extract may learn it again."""
    from cairn.memory.forget.tombstones import Statement, Tombstone, add_tombstones, read_tombstones

    project = new_project()
    forgotten = Statement(
        "Prefers uv over pip", "The user installs Python packages with uv", "Use uv pip install."
    )
    add_tombstones(
        project.user_memory,
        [Tombstone.of(forgotten, id="t", forgotten_at=0, scope="user", relative_path="x")],
    )
    target = project.user_memory / "feedback" / "prefer-uv.md"
    project.server.handler = main_agent(write(target, UV), reply("Saved it."))
    session = session_of(project, Person("reject"))

    await run(session, "/remember I prefer uv over pip")
    assert await project.runtime.memory_manager().drain(10)

    assert unstamped(target.read_text()) == UV
    assert read_tombstones(project.user_memory) == []
    [entry], _ = read_history([("user", project.user_memory)])
    assert entry.detail == "stated again after a forget: Prefers uv over pip"
    await session.close()


# --- a fact the user asked to forget ----------------------------------------------------------

TABS = memory_file("Indent with tabs", "Indent with tabs, never spaces.",
                   description="The user always indents code with tabs")  # fmt: skip
TABS_AGAIN = memory_file("Tabs for indentation", "Always indent with tabs.",
                         description="The user indents with tabs")  # fmt: skip
TABS_MARKER = "indent with tabs"


class Forgetting(Person):
    """A user who confirms a ``/forget`` and approves every other request."""

    def __init__(self) -> None:
        super().__init__("allow_once")

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        return ["Forget them"]


def tabs_assistant(project: Project) -> Any:
    """The main model saves the tabs rule on its own whenever it is told about tabs or the
    parser (it still has the statement in its window); the forget selector picks the rule."""
    first = project.user_memory / "feedback" / "tabs.md"
    again = project.user_memory / "feedback" / "tabs-again.md"

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "forget":
            return reply(json.dumps({"selected_ids": ["user:feedback/tabs.md"]}))
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        if request.purpose != "main":
            return None
        if request.messages[-1].get("role") == "tool":
            return reply("Noted.")
        said = request.last_user_text().lower()
        if "i always indent with tabs" in said and not first.exists():
            return write(first, TABS)
        if "tabs" in said or "parser" in said:
            return write(again, TABS_AGAIN)
        return reply("Fine.")

    return handle


def feedback_files(project: Project) -> list[str]:
    folder = project.user_memory / "feedback"
    return sorted(p.name for p in folder.glob("*.md")) if folder.exists() else []


async def forgotten_tabs_session(project: Project) -> Session:
    """A session where the user stated the tabs rule, the agent saved it, and the user
    forgot it with ``/forget``: one tombstone."""
    from cairn.memory.forget.tombstones import read_tombstones

    project.server.handler = tabs_assistant(project)
    session = session_of(project, Forgetting())
    await run(session, "I always indent with tabs.")
    assert feedback_files(project) == ["tabs.md"]
    _, events = await run(session, "/forget the tabs rule")
    assert feedback_files(project) == [], events
    assert [t.title for t in read_tombstones(project.user_memory)] == ["Indent with tabs"]
    return session


@pytest.mark.parametrize(
    "later",
    ["Now let's look at the parser.", "Do I indent with tabs or spaces?"],
    ids=["another-subject", "a-question"],
)
async def test_the_agent_saving_a_forgotten_fact_on_its_own_is_refused(
    new_project: ProjectFactory, later: str
) -> None:
    """Regression: the model, with "I always indent with tabs" still in its window, saved the
    rule again on its own after the user forgot it; the write went through and lifted the
    tombstone, so the forgotten fact was back and Extract could learn it again too."""
    from cairn.memory.forget.tombstones import read_tombstones

    project = new_project()
    manager = project.runtime.memory_manager()
    session = await forgotten_tabs_session(project)

    _, events = await run(session, later)
    assert await manager.drain(10)

    assert feedback_files(project) == []
    assert [t.title for t in read_tombstones(project.user_memory)] == ["Indent with tabs"]
    [message] = tool_messages(project.requests("main")[-1])[-1:]
    assert "was not saved: the user asked to forget this on " in message
    assert "'Indent with tabs'" in message and "ask them" in message
    assert not [e for e in events if isinstance(e, MemoryChanged)]

    _, events = await run(session, "Which indentation do I use?")
    recalled = [ref.name for e in events if isinstance(e, MemoryRecalled) for ref in e.memories]
    assert recalled == []
    assert not project.requests("main")[-1].contains("Always indent with tabs.")
    await session.close()


async def test_the_agent_may_save_a_forgotten_fact_the_user_stated_again(
    new_project: ProjectFactory,
) -> None:
    """The same rule as Extract's: a user message after the forget that restates the fact
    lifts its tombstone, and the agent's write of it saves it and removes the tombstone."""
    from cairn.memory.forget.tombstones import read_tombstones

    project = new_project()
    manager = project.runtime.memory_manager()
    session = await forgotten_tabs_session(project)

    _, events = await run(session, "Actually, I do always indent with tabs. Please keep that.")
    assert await manager.drain(10)

    assert feedback_files(project) == ["tabs-again.md"]
    assert unstamped((project.user_memory / "feedback" / "tabs-again.md").read_text()) == (
        TABS_AGAIN
    )
    assert read_tombstones(project.user_memory) == []
    [change] = [e for e in events if isinstance(e, MemoryChanged)]
    assert [r.name for r in change.saved] == ["Tabs for indentation"]
    newest = read_history([("user", project.user_memory)])[0][0]
    assert (newest.operation, newest.files) == ("remember", ["feedback/tabs-again.md"])
    assert newest.detail == "stated again after a forget: Indent with tabs"
    await session.close()


async def test_remember_after_a_forget_in_the_same_session_saves_the_fact_again(
    new_project: ProjectFactory,
) -> None:
    """``/remember`` is the user's explicit word: the write needs no restating message."""
    from cairn.memory.forget.tombstones import read_tombstones

    project = new_project()
    session = await forgotten_tabs_session(project)

    await run(session, "/remember the tabs rule")
    assert await project.runtime.memory_manager().drain(10)

    assert feedback_files(project) == ["tabs-again.md"]
    assert read_tombstones(project.user_memory) == []
    await session.close()
