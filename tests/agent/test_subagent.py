"""The restricted background agent the memory agents run on."""

from __future__ import annotations

from pathlib import Path

from cairn.abort import AbortController
from cairn.agent.subagent import run_subagent
from cairn.config.settings import Settings
from cairn.testing import ScriptedProvider, reply, tool_call
from cairn.tools.base import ToolContext
from cairn.tools.registry import default_registry
from cairn.vocabulary.events import SessionEvent, ToolCallStart


def context(tmp_path: Path) -> ToolContext:
    return ToolContext(
        workspace=tmp_path, abort=AbortController().signal, writable_roots=[tmp_path / "memory"]
    )


async def test_tool_call_events_reach_the_caller(tmp_path: Path) -> None:
    provider = ScriptedProvider()
    provider.enqueue(tool_call("glob", {"pattern": "*.md"}), reply("Done."))
    seen: list[SessionEvent] = []

    async def events(event: SessionEvent) -> None:
        seen.append(event)

    result = await run_subagent(
        provider=provider, settings=Settings(), purpose="dream", system_prompt="s", task="t",
        registry=default_registry().subset(["glob"]), ctx=context(tmp_path), events=events,
    )  # fmt: skip

    assert result.status == "completed" and result.tool_calls == 1
    assert [e.name for e in seen if isinstance(e, ToolCallStart)] == ["glob"]
    assert provider.requests[0].purpose == "dream"


async def test_writes_outside_the_writable_roots_are_refused(tmp_path: Path) -> None:
    provider = ScriptedProvider()
    outside = tmp_path / "outside.md"
    write = tool_call("write_file", {"file_path": str(outside), "content": "x"})
    provider.enqueue(write, reply("ok"))

    result = await run_subagent(
        provider=provider, settings=Settings(), purpose="extract", system_prompt="s", task="t",
        registry=default_registry().subset(["write_file"]), ctx=context(tmp_path),
    )  # fmt: skip

    assert not outside.exists() and result.files_written == []


async def test_the_turn_limit_stops_an_agent_that_keeps_calling_tools(tmp_path: Path) -> None:
    provider = ScriptedProvider(default=tool_call("glob", {"pattern": "*"}))

    result = await run_subagent(
        provider=provider, settings=Settings(), purpose="extract", system_prompt="s", task="t",
        registry=default_registry().subset(["glob"]), ctx=context(tmp_path), max_turns=2,
    )  # fmt: skip

    assert (result.status, result.turns) == ("max_turns", 2)
