"""The memory agents' tools: locked atomic writes, read-before-overwrite, refused targets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cairn.abort import AbortController
from cairn.memory.background.agent_tools import (
    MEMORY_AGENT_TOOLS,
    WRITE_PAUSE_ENV,
    memory_agent_context,
    memory_agent_registry,
)
from cairn.memory.store.locks import MemoryBusy, hold_roots
from cairn.tools.base import ToolContext, ToolResult

from ...loop_helpers import run_counting_other_tasks
from ...polling import eventually_async

DOC = "---\nname: Tabs\ndescription: tabs\ntype: feedback\n---\n\nUse tabs.\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    return root


def tools(root: Path, **options: Any) -> tuple[Any, ToolContext]:
    registry, files = memory_agent_registry(**options)
    ctx = memory_agent_context(
        workspace=root, writable=[root], readable=(), files=files, abort=AbortController().signal
    )
    return registry, ctx


async def call(registry: Any, ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    return await registry.get(name).execute(args, ctx)


def test_the_agents_get_exactly_the_memory_tools(root: Path) -> None:
    registry, _ = tools(root)
    assert sorted(registry.names()) == sorted(MEMORY_AGENT_TOOLS)


async def test_a_new_memory_is_written(root: Path) -> None:
    registry, ctx = tools(root)

    target = root / "feedback" / "t.md"
    result = await call(registry, ctx, "write_file", file_path=str(target), content=DOC)

    assert result.ok and (root / "feedback" / "t.md").read_text() == DOC


async def test_an_existing_memory_is_overwritten_only_after_reading_it(root: Path) -> None:
    target = root / "t.md"
    target.write_text("old\n")
    registry, ctx = tools(root)

    refused = await call(registry, ctx, "write_file", file_path=str(target), content=DOC)
    await call(registry, ctx, "read_file", file_path=str(target))
    allowed = await call(registry, ctx, "write_file", file_path=str(target), content=DOC)

    assert refused.error is not None and "read_file first" in refused.error
    assert allowed.ok and target.read_text() == DOC


async def test_a_memory_changed_by_someone_else_after_the_read_is_not_overwritten(
    root: Path,
) -> None:
    target = root / "t.md"
    target.write_text("old\n")
    registry, ctx = tools(root)
    await call(registry, ctx, "read_file", file_path=str(target))
    target.write_text("another process wrote this\n")

    result = await call(registry, ctx, "write_file", file_path=str(target), content=DOC)

    assert result.error is not None
    assert target.read_text() == "another process wrote this\n"


async def test_an_edit_applies_to_the_current_text(root: Path) -> None:
    target = root / "t.md"
    target.write_text(DOC)
    registry, ctx = tools(root)

    result = await call(
        registry, ctx, "edit", file_path=str(target), old_string="Use tabs.", new_string="Tabs."
    )

    assert result.ok and "Tabs.\n" in target.read_text()


@pytest.mark.parametrize(
    ("relative", "why"),
    [("MEMORY.md", "generated"), ("feedback/x.txt", "only Markdown"),
     (".hidden.md", "only Markdown"), (".trash/1/x.md", "only Markdown"),
     ("pinned/rule.md", "protected")],
)  # fmt: skip
async def test_non_memory_targets_are_refused(root: Path, relative: str, why: str) -> None:
    registry, ctx = tools(root)

    result = await call(registry, ctx, "write_file", file_path=str(root / relative), content=DOC)

    assert result.error is not None and why in result.error
    assert not (root / relative).exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [("Use tabs.", "no '---' front matter block"),
     ("---\nname: Tabs\ntype: feedback\n---\nUse tabs.", "no 'description'"),
     ("---\nname: T\ndescription: d\ntype: [user]\n---\nx", "'type' must be one value")],
)  # fmt: skip
async def test_only_a_complete_memory_file_is_written(root: Path, content: str, why: str) -> None:
    registry, ctx = tools(root)

    result = await call(registry, ctx, "write_file", file_path=str(root / "t.md"), content=content)

    assert result.error is not None and why in result.error
    assert "name: <short title>" in result.error  # the agent is told the format
    assert not (root / "t.md").exists()


async def test_an_edit_that_breaks_the_front_matter_is_refused(root: Path) -> None:
    target = root / "t.md"
    target.write_text(DOC)
    registry, ctx = tools(root)

    result = await call(
        registry, ctx, "edit", file_path=str(target), old_string="type: feedback", new_string=""
    )

    assert result.error is not None and "was not saved" in result.error
    assert target.read_text() == DOC


async def test_a_name_the_caller_allows_may_be_written_at_the_top(root: Path) -> None:
    registry, ctx = tools(root, allowed_names=[".dream-operations.json"])

    result = await call(
        registry, ctx, "write_file", file_path=str(root / ".dream-operations.json"), content="{}"
    )

    assert result.ok


async def test_a_write_holds_the_root_lock_and_renames_a_complete_temp_file(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the test slept 0.2 s and expected the write's 0.5 s pause still to run, which
    failed on a loaded machine. It polls for the complete temp file instead; from then on it
    awaits nothing, so the writer (a task of the same loop) cannot rename it in between."""
    monkeypatch.setenv(WRITE_PAUSE_ENV, "0.5")
    registry, ctx = tools(root)
    target = root / "t.md"
    writing = asyncio.create_task(
        call(registry, ctx, "write_file", file_path=str(target), content=DOC)
    )

    def temp_written() -> bool:
        return [t.read_text() for t in root.glob(".t.md.*.tmp")] == [DOC]

    assert await eventually_async(temp_written)
    assert not target.exists()
    with pytest.raises(MemoryBusy), hold_roots([root], timeout=0.05):
        pass
    assert (await writing).ok
    assert target.read_text() == DOC and not list(root.glob(".*.tmp"))


async def test_the_agents_read_and_write_memory_files_off_the_event_loop(root: Path) -> None:
    """Regression (#18): MemoryFiles read and wrote memory files on the event loop, stalling
    every session of the process for as long as the disk took."""
    _, files = memory_agent_registry()
    target = root / "t.md"
    target.write_text(DOC)

    text, ran_while_reading = await run_counting_other_tasks(files.read_text(target))
    _, ran_while_writing = await run_counting_other_tasks(files.write_text(target, text + "M\n"))

    assert ran_while_reading > 0 and ran_while_writing > 0
    assert target.read_text() == DOC + "M\n"


async def test_a_memory_stating_a_forgotten_fact_is_refused_and_nothing_is_written(
    root: Path,
) -> None:
    from cairn.memory.forget.tombstones import ForgottenFacts, Statement, Tombstone, add_tombstones

    forgotten = Statement("Tabs", "tabs", "Use tabs.")
    add_tombstones(
        root, [Tombstone.of(forgotten, id="t", forgotten_at=0, scope="user", relative_path="x")]
    )
    registry, ctx = tools(root, forgotten=ForgottenFacts.load([root]))

    target = root / "feedback" / "tabs.md"
    result = await call(registry, ctx, "write_file", file_path=str(target), content=DOC)

    assert result.error is not None and "asked to forget this on 1970-01-01" in result.error
    assert not target.exists()
