"""The one tool loop (cairn.agent.loop), driven by a small driver of the test's own over a real
agent client, the scripted provider and a real tool scheduler: how each kind of run ends, and
what the history holds afterwards. The main turn's driver is tested through real sessions
(tests/session), a subagent's through run_subagent (test_subagent.py)."""

from __future__ import annotations

from pathlib import Path

from cairn.abort import AbortController
from cairn.agent.client import AgentClient, AgentEvent, AgentFinished, SendKind
from cairn.agent.loop import CUT_CALL_ERROR, LOOP_STOP_NOTE, LoopEnd, ToolLoop
from cairn.config.settings import PermissionsSettings, Settings
from cairn.content import FunctionCall, FunctionResponse, Part, Text
from cairn.testing import (
    Reply,
    ScriptedFrontend,
    ScriptedProvider,
    ToolCallSpec,
    reply,
    tool_call,
    tool_calls,
)
from cairn.tools.base import ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.registry import default_registry
from cairn.tools.scheduler import ToolOutcome, ToolScheduler
from cairn.vocabulary.events import SessionEvent


class Driver:
    """Runs calls through a real scheduler; keeps going once with ``more`` after an answer."""

    def __init__(self, workspace: Path, frontend: ScriptedFrontend, more: str | None = None):
        self.registry = default_registry().subset(["glob", "write_file"])
        self.scheduler = ToolScheduler(
            registry=self.registry,
            rules=PermissionRules.from_settings(PermissionsSettings()),
            frontend=frontend,
            approval_mode=lambda: "default",
        )
        self.ctx = ToolContext(workspace=workspace, abort=AbortController().signal)
        self.more = more
        self.answers: list[str] = []
        self.streamed: list[AgentEvent] = []
        self.sent: list[list[Part]] = []

    async def at_send_point(self, parts: list[Part]) -> list[Part]:
        self.sent.append(parts)
        return parts

    async def on_event(self, event: AgentEvent) -> None:
        self.streamed.append(event)

    async def on_answer(self, answer: AgentFinished) -> None:
        self.answers.append(answer.text)

    async def run_tools(self, calls: list[FunctionCall]) -> list[ToolOutcome]:
        return await self.scheduler.run(calls, self.ctx, _ignore)

    def steering(self) -> list[Part]:
        return [Text("typed meanwhile")]

    async def after_stop(self, answer: AgentFinished) -> list[Part] | None:
        more, self.more = self.more, None
        return [Text(more)] if more else None


async def _ignore(event: SessionEvent) -> None:
    return None


def _scripted(*replies: Reply) -> ScriptedProvider:
    provider = ScriptedProvider()
    provider.enqueue(*replies)
    return provider


def _client(provider: ScriptedProvider) -> AgentClient:
    return AgentClient(
        provider=provider,
        settings=Settings(),
        session_id="s",
        system_prompt="test",
        tools=default_registry().subset(["glob", "write_file"]).declarations,
    )


async def _run(loop: ToolLoop, text: str = "go") -> LoopEnd:
    return await loop.run([Text(text)], SendKind.USER_QUERY, AbortController().signal)


async def test_calls_run_and_their_results_go_back_until_the_model_answers(tmp_path: Path) -> None:
    provider = _scripted(tool_call("glob", {"pattern": "*"}), reply("Done."))
    driver = Driver(tmp_path, ScriptedFrontend())
    loop = ToolLoop(_client(provider), driver, max_requests=10)

    assert await _run(loop) is LoopEnd.ANSWERED
    assert (loop.requests, loop.tool_calls) == (2, 1)
    assert driver.answers == ["", "Done."]
    results = driver.sent[1]
    assert isinstance(results[0], FunctionResponse) and results[1] == Text("typed meanwhile")


async def test_after_stop_keeps_the_run_going_as_a_continuation(tmp_path: Path) -> None:
    provider = _scripted(reply("First."), reply("Second."))
    driver = Driver(tmp_path, ScriptedFrontend(), more="and check again")
    loop = ToolLoop(_client(provider), driver, max_requests=10)

    assert await _run(loop) is LoopEnd.ANSWERED
    assert driver.answers == ["First.", "Second."]
    assert driver.sent[1] == [Text("and check again")]


async def test_the_request_cap_ends_the_run_before_another_request(tmp_path: Path) -> None:
    provider = ScriptedProvider(default=tool_call("glob", {"pattern": "*"}))
    loop = ToolLoop(_client(provider), Driver(tmp_path, ScriptedFrontend()), max_requests=3)

    assert await _run(loop) is LoopEnd.MAX_REQUESTS
    assert len(provider.requests) == 3 and loop.tool_calls == 3


async def test_a_declined_call_hands_control_back_with_its_answer_kept(tmp_path: Path) -> None:
    write = tool_call("write_file", {"file_path": str(tmp_path / "a.txt"), "content": "x"})
    provider = _scripted(write, reply("never sent"))
    client = _client(provider)
    loop = ToolLoop(
        client, Driver(tmp_path, ScriptedFrontend(permissions=["reject"])), max_requests=10
    )

    assert await _run(loop) is LoopEnd.REJECTED
    assert len(provider.requests) == 1
    last = client.history.last()
    assert last is not None and isinstance(last.parts[0], FunctionResponse)  # well formed


async def test_a_run_that_hears_refusals_goes_on_after_a_declined_call(tmp_path: Path) -> None:
    write = tool_call("write_file", {"file_path": str(tmp_path / "a.txt"), "content": "x"})
    provider = _scripted(write, reply("I will not write it."))
    driver = Driver(tmp_path, ScriptedFrontend(permissions=["reject"]))
    loop = ToolLoop(_client(provider), driver, max_requests=10, stop_on_rejection=False)

    assert await _run(loop) is LoopEnd.ANSWERED
    assert driver.answers[-1] == "I will not write it."
    assert not (tmp_path / "a.txt").exists()


async def test_loop_detection_answers_the_cut_calls_and_tells_the_model_why(
    tmp_path: Path,
) -> None:
    same = [ToolCallSpec("glob", {"pattern": "*"}, f"c{i}") for i in range(6)]
    provider = ScriptedProvider(tool_calls(*same))
    client = _client(provider)
    loop = ToolLoop(client, Driver(tmp_path, ScriptedFrontend()), max_requests=10)

    assert await _run(loop) is LoopEnd.LOOP
    assert loop.loop_info is not None
    assert loop.loop_info.loop_type == "consecutive_identical_tool_calls"
    last = client.history.last()
    assert last is not None and last.role == "user"
    skipped = [p for p in last.parts if isinstance(p, FunctionResponse)]
    assert [p.id for p in skipped] == ["c0", "c1", "c2", "c3", "c4"]
    assert last.parts[-1] == Text(LOOP_STOP_NOTE)
    assert client.history.dangling_calls() == []


async def test_a_client_limit_ends_the_run_with_the_limit(tmp_path: Path) -> None:
    provider = ScriptedProvider(default=tool_call("glob", {"pattern": "*"}))
    client = AgentClient(
        provider=provider,
        settings=Settings.model_validate({"model": {"maxSessionTurns": 2}}),
        session_id="s",
        system_prompt="test",
        tools=lambda: [],
    )
    loop = ToolLoop(client, Driver(tmp_path, ScriptedFrontend()), max_requests=10)

    assert await _run(loop) is LoopEnd.LIMIT
    assert loop.limit is not None and loop.limit.kind == "max_session_turns"
    assert len(provider.requests) == 2


async def test_an_answer_cut_at_its_output_bound_ends_the_run_with_its_calls_not_run(
    tmp_path: Path,
) -> None:
    """A subagent (or Extract, Dream) whose answer is cut stops as the main turn does: the
    calls of a cut answer may be incomplete, so they are answered as not run."""
    cut = tool_call("write_file", {"file_path": str(tmp_path / "a.txt"), "content": "x"})
    cut.finish_reason = "length"
    provider = _scripted(cut, reply("never sent"))
    client = _client(provider)
    driver = Driver(tmp_path, ScriptedFrontend())
    loop = ToolLoop(client, driver, max_requests=10)

    assert await _run(loop) is LoopEnd.CUT
    assert loop.finish_reason == "length" and len(provider.requests) == 1
    assert not (tmp_path / "a.txt").exists()
    last = client.history.last()
    assert last is not None and last.parts[0] == FunctionResponse(
        last.parts[0].id, "write_file", {"error": CUT_CALL_ERROR}
    )
