"""The extract cursor after a conversation rewind: Extract neither skips nor repeats history."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cairn.memory.background.cursor import ExtractCursor, clamp_cursor, read_cursor, write_cursor
from cairn.testing import reply

from .task_helpers import (
    ProjectFactory,
    agent_script,
    conversation,
    memory_file,
    new_project,
    writes,
)

__all__ = ["new_project"]  # the fixture, imported for pytest

SESSION = "11111111-2222-3333-4444-555555555555"
T0 = 1_750_000_000.0


def test_clamping_moves_the_cursor_back_to_the_rewind_point(tmp_path: Path) -> None:
    write_cursor(tmp_path, ExtractCursor("s1", 12), now=T0)

    assert clamp_cursor(tmp_path, "s1", 4, now=T0)
    assert read_cursor(tmp_path, now=T0) == ExtractCursor("s1", 4)


def test_clamping_never_moves_a_cursor_forward_or_touches_another_session(
    tmp_path: Path,
) -> None:
    write_cursor(tmp_path, ExtractCursor("s1", 3), now=T0)

    assert not clamp_cursor(tmp_path, "s1", 10, now=T0)
    assert not clamp_cursor(tmp_path, "s2", 1, now=T0)
    assert read_cursor(tmp_path, now=T0) == ExtractCursor("s1", 3)


async def test_an_extraction_running_during_a_rewind_leaves_the_cursor_at_the_rewind_point(
    new_project: ProjectFactory,
) -> None:
    """Regression guard: the run started with the pre-rewind history and would move the cursor
    past the rewind point when it ends, so the next turns' messages would be skipped."""
    project = new_project()
    path = str(project.memory / "feedback" / "pytest.md")
    answer = writes((path, memory_file("Pytest", "Use pytest.")))
    project.server.handler = agent_script("extract", reply(tool_calls=answer.tool_calls, delay=0.5))
    history = conversation("I use pytest.", "ok", "Also ruff.", "ok", "And mypy.", "ok")
    project.manager.schedule_extract(
        project_root=project.workspace, session_id=SESSION, history=history,
        runtime=project.runtime,
    )  # fmt: skip
    await project.server.async_wait_for_requests(1, purpose="extract")

    await project.manager.conversation_rewound(SESSION, 2)
    assert await project.manager.drain(10)

    assert read_cursor(project.state, now=T0) == ExtractCursor(SESSION, 2)
    assert (project.memory / "feedback" / "pytest.md").exists()  # memories are kept


async def test_a_waiting_request_with_the_rewound_turns_is_dropped(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script("extract", reply("Nothing to save.", delay=0.3))
    for texts in (("one", "ok"), ("one", "ok", "REWOUND-TURN", "ok")):
        project.manager.schedule_extract(
            project_root=project.workspace, session_id=SESSION, history=conversation(*texts),
            runtime=project.runtime,
        )  # fmt: skip

    await project.manager.conversation_rewound(SESSION, 2)
    assert await project.manager.drain(10)
    await asyncio.sleep(0)

    requests = project.requests("extract")
    assert len(requests) == 1 and not requests[0].contains("REWOUND-TURN")
    assert [t.status for t in project.manager.recent_tasks()] == ["completed", "superseded"]
