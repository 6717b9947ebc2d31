"""Task records, drain, agent limits and locating written files."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cairn.config.settings import Settings
from cairn.memory.background.tasks import TaskBook, agent_limits, written_files


async def test_drain_waits_for_tasks_started_while_it_waits() -> None:
    book = TaskBook()
    done: list[str] = []

    async def second() -> None:
        await asyncio.sleep(0.05)
        done.append("second")

    async def first() -> None:
        await asyncio.sleep(0.05)
        book.start(None, second(), name="second")
        done.append("first")

    book.start(None, first(), name="first")

    assert await book.drain(5)
    assert done == ["first", "second"]


async def test_drain_gives_up_after_the_timeout_without_cancelling() -> None:
    book = TaskBook()
    task = book.start(None, asyncio.sleep(0.3), name="slow")

    assert not await book.drain(0.05)
    assert not task.cancelled()
    assert await book.drain(5)


def test_records_keep_the_newest_ones() -> None:
    book = TaskBook(limit=2)
    for session in ("a", "b", "c"):
        book.new("extract", session)

    assert [r.session_id for r in book.records()] == ["b", "c"]


def test_agent_limits_use_defaults_settings_and_zero_means_no_limit() -> None:
    defaults = Settings()
    assert agent_limits(defaults, default_turns=5, default_minutes=2) == (5, 120.0)
    custom = Settings.model_validate({"memory": {"agentMaxTurns": 3, "agentTimeoutMinutes": 0}})
    assert agent_limits(custom, default_turns=5, default_minutes=2) == (3, None)


def test_written_files_are_located_in_their_root_with_their_topic(tmp_path: Path) -> None:
    project, user = tmp_path / "p", tmp_path / "u"
    paths = [project / "feedback" / "a.md", user / "user" / "me.md", project / "notes.md",
             tmp_path / "elsewhere.md"]  # fmt: skip

    found = written_files(paths, [("project", project), ("user", user)])

    assert [(f.label, f.topic) for f in found] == [
        ("project:feedback/a.md", "feedback"), ("user:user/me.md", "user"),
        ("project:notes.md", None),
    ]  # fmt: skip
