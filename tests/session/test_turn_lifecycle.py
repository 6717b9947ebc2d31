"""The seed's turn classification and memory-lifecycle invariants, on the shared Session.

Every front end (terminal UI, headless, ACP, daemon) runs turns through ``Session.prompt``, so
these tests pin all of them. What is observed is what leaves the process: the requests the
scripted model server receives (purposes ``main``, ``recall-selector``, ``extract``), the memory
telemetry events, and real memory files on disk.

A begun Recall shows as a ``recall-selector`` request (there are memories, and a model to ask)
and, whatever happens next, as exactly one terminal ``memory.recall.delivery`` event (phase
``refined``: a refined delivery or a discard).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cairn import telemetry
from cairn.config.loader import Endpoint
from cairn.config.settings import Settings
from cairn.recording.reader import pending_question
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import (
    NEVER,
    RecordedRequest,
    Reply,
    ScriptedFrontend,
    ScriptedServer,
    error_reply,
    reply,
    tool_call,
)
from cairn.testing.fixtures import TEST_API_KEY, TEST_MODEL
from cairn.vocabulary.events import SessionEvent, TurnResult

from ..polling import DEADLINE_SECONDS

pytestmark = pytest.mark.timeout(60)

DEPLOY_MARKER = "MARKER-DEPLOY-7731"  # in a memory the deploy prompt matches lexically
STYLE_MARKER = "MARKER-STYLE-4410"  # in a memory only the selector chooses
DEPLOY_PROMPT = "how do we deploy the billing service?"
HOOK_CONTEXT = "HOOK-CONTEXT-991"
ANSWER_DELAY = 0.2  # seconds before an unscripted model answer
DELIVERY_EVENT = "memory.recall.delivery"
_MANIFEST_PATH = re.compile(r"^- \[\w+\] (\S+\.md) \(", re.MULTILINE)


# ----- the world a turn runs in -----


@dataclass(frozen=True)
class Mark:
    requests: int
    telemetry: int
    tasks: set[str]


@dataclass
class World:
    server: ScriptedServer
    project: Path
    runtime: Runtime
    telemetry: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    events: list[SessionEvent] = field(default_factory=list)

    def session(self, user: ScriptedFrontend | None = None) -> Session:
        return self.runtime.new_session(frontend=user or ScriptedFrontend())

    async def prompt(self, session: Session, request: PromptRequest | str) -> TurnResult:
        if isinstance(request, str):
            request = PromptRequest(request)

        async def sink(event: SessionEvent) -> None:
            self.events.append(event)

        return await session.prompt(request, sink)

    def mark(self) -> Mark:
        """Where the recorded requests, telemetry and memory task records stand now."""
        tasks = self.runtime.memory_manager().recent_tasks()
        return Mark(len(self.server.requests), len(self.telemetry), {t.id for t in tasks})

    def requests_since(self, mark: Mark, purpose: str) -> list[RecordedRequest]:
        return [r for r in self.server.requests[mark.requests :] if r.purpose == purpose]

    def terminal_deliveries_since(self, mark: Mark) -> list[dict[str, Any]]:
        return [
            attrs
            for name, attrs in self.telemetry[mark.telemetry :]
            if name == DELIVERY_EVENT and attrs["phase"] == "refined"
        ]

    def recall_events_since(self, mark: Mark) -> list[str]:
        return [
            name for name, _ in self.telemetry[mark.telemetry :] if name.startswith("memory.recall")
        ]

    def scheduled_since(self, mark: Mark) -> list[str]:
        """The kinds of the memory tasks (extract, dream) scheduled since ``mark``."""
        tasks = self.runtime.memory_manager().recent_tasks()
        return sorted(t.kind for t in tasks if t.id not in mark.tasks)

    async def settle(self) -> None:
        """Let scheduled background memory work start (and, once Extract exists, finish)."""
        drain = getattr(self.runtime.memory_manager(), "drain", None)
        if drain is not None:
            await drain(timeout=10)
        else:
            await asyncio.sleep(0.05)


def write_memory(root: Path, name: str, title: str, description: str, body: str) -> None:
    path = root / "project" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {title}\ndescription: {description}\ntype: project\n---\n\n{body}\n"
    )


def selector(choose: str | None = None, *, delay: float = 0.0, main_delay: float = 0.0) -> Any:
    """A server handler: the selector picks the memory file named ``choose`` (or nothing)."""

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose != "recall-selector":
            return None
        paths = _MANIFEST_PATH.findall(request.last_user_text())
        chosen = [p for p in paths if choose and p.endswith(f"/{choose}")]
        return Reply(text=json.dumps({"selected_memories": chosen}), delay=delay)

    return handle


def hook(tmp_path: Path, name: str, output: dict[str, Any] | None, *, once: bool = False) -> str:
    """A hook command printing ``output`` (only the first time when ``once``); it logs each run."""
    script = tmp_path / f"{name}.py"
    runs = tmp_path / f"{name}.runs"
    script.write_text(
        "import json, pathlib, sys\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "count = int(runs.read_text()) if runs.exists() else 0\n"
        "runs.write_text(str(count + 1))\n"
        f"output = {output!r}\n"
        f"if output is not None and (count == 0 or not {once!r}):\n"
        "    print(json.dumps(output))\n"
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def hook_runs(tmp_path: Path, name: str) -> int:
    runs = tmp_path / f"{name}.runs"
    return int(runs.read_text()) if runs.exists() else 0


@pytest.fixture
async def make_world(
    scripted_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.setenv("CAIRN_MEMORY_LOCAL", "1")
    monkeypatch.delenv("CAIRN_MEMORY_BASE_DIR", raising=False)
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    memory = project / ".cairn" / "memory"
    write_memory(
        memory,
        "deploy",
        "billing deploy checklist",
        "how we deploy the billing service",
        f"{DEPLOY_MARKER}: deploy billing with `make release` after tagging.",
    )
    write_memory(
        memory,
        "style",
        "house code style",
        "formatting preferences",
        f"{STYLE_MARKER}: tabs, never spaces.",
    )
    scripted_server.handler = selector()
    # Unscripted requests (the main model, memory agents) answer after a moment, so a selector
    # request always leaves before the turn ends (an ended turn cancels its pending recall).
    scripted_server.default = reply("Noted.", delay=ANSWER_DELAY)
    worlds: list[World] = []

    def make(**settings: Any) -> World:
        # Semantic candidates wait for the first request to leave and load their model: the
        # selector would leave after ANSWER_DELAY; these tests are about the lexical recall.
        settings.setdefault("memory", {}).setdefault("semanticCandidates", False)
        runtime = Runtime(
            cwd=project,
            settings=Settings.model_validate(settings),
            provider=_provider(scripted_server),
            endpoint=Endpoint(scripted_server.base_url, TEST_API_KEY, TEST_MODEL),
        )
        world = World(scripted_server, project, runtime)
        world._unsubscribe = telemetry.subscribe(  # type: ignore[attr-defined]
            lambda name, attrs: world.telemetry.append((name, attrs))
        )
        worlds.append(world)
        return world

    yield make
    for world in worlds:
        world._unsubscribe()  # type: ignore[attr-defined]
        await world.runtime.aclose()


def _provider(server: ScriptedServer) -> Any:
    from cairn.llm.openai import OpenAIProvider

    return OpenAIProvider(
        base_url=server.base_url, api_key=TEST_API_KEY, model=TEST_MODEL, fast_model=None
    )


def hooks_settings(**events: str) -> dict[str, Any]:
    return {
        "hooks": {
            event: [{"hooks": [{"type": "command", "command": command}]}]
            for event, command in events.items()
        }
    }


def occurrences(request: RecordedRequest, text: str) -> int:
    return json.dumps(request.messages).count(text)


# ----- the classification table -----


async def test_a_fresh_prompt_begins_recall_with_its_raw_text(make_world: Any) -> None:
    world = make_world()
    session = world.session()
    mark = world.mark()

    result = await world.prompt(session, DEPLOY_PROMPT)

    assert result.stop_reason == "end_turn" and result.fresh
    [select] = world.requests_since(mark, "recall-selector")
    assert f"Query: {DEPLOY_PROMPT}\n" in select.last_user_text()
    [first] = world.requests_since(mark, "main")
    assert first.contains(DEPLOY_MARKER)
    assert len(world.terminal_deliveries_since(mark)) == 1


async def test_a_fresh_prompt_that_ends_normally_schedules_extract_and_dream_once(
    make_world: Any,
) -> None:
    world = make_world()
    session = world.session()
    mark = world.mark()

    await world.prompt(session, DEPLOY_PROMPT)
    await world.settle()

    assert world.scheduled_since(mark) == ["dream", "extract"]
    assert world.requests_since(mark, "extract")


async def test_a_model_bound_slash_command_is_a_fresh_turn(make_world: Any) -> None:
    world = make_world()
    session = world.session()
    mark = world.mark()

    await world.prompt(session, "/remember billing deploys need a release tag")

    [select] = world.requests_since(mark, "recall-selector")
    assert "Query: /remember billing deploys need a release tag" in select.last_user_text()
    [main] = world.requests_since(mark, "main")
    assert main.contains("The user asks you to remember this for future sessions")
    assert len(world.terminal_deliveries_since(mark)) == 1
    await world.settle()
    assert world.scheduled_since(mark) == ["dream", "extract"]


async def test_a_locally_handled_slash_command_never_starts_recall(make_world: Any) -> None:
    world = make_world()
    session = world.session()
    mark = world.mark()

    result = await world.prompt(session, "/help")
    await world.settle()

    assert result.handled_locally
    assert world.server.requests[mark.requests :] == []
    assert world.recall_events_since(mark) == []
    assert world.scheduled_since(mark) == []


async def test_a_retry_neither_recalls_nor_schedules_memory_work(make_world: Any) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, DEPLOY_PROMPT)
    await world.settle()
    mark = world.mark()

    result = await world.prompt(session, PromptRequest("", retry=True))
    await world.settle()

    assert not result.fresh
    assert world.requests_since(mark, "recall-selector") == []
    assert world.recall_events_since(mark) == []
    [retried] = world.requests_since(mark, "main")
    assert occurrences(retried, DEPLOY_PROMPT) == 1
    assert world.scheduled_since(mark) == []


async def test_continuing_an_interrupted_turn_neither_recalls_nor_schedules(
    make_world: Any,
) -> None:
    world = make_world()
    world.server.enqueue(reply("never arrives", delay=30), purpose="main")
    session = world.session()
    running = asyncio.ensure_future(world.prompt(session, DEPLOY_PROMPT))
    await world.server.async_wait_for_requests(1, purpose="main")
    # the first turn's own Recall, arrived before the mark (flaky under load: it came after)
    await world.server.async_wait_for_requests(1, purpose="recall-selector")
    session.cancel()
    assert (await running).stop_reason == "cancelled"
    await world.settle()
    mark = world.mark()

    result = await world.prompt(session, PromptRequest("", continue_turn=True))
    await world.settle()

    assert result.stop_reason == "end_turn" and not result.fresh
    assert world.requests_since(mark, "recall-selector") == []
    assert world.recall_events_since(mark) == []
    [continued] = world.requests_since(mark, "main")
    assert occurrences(continued, DEPLOY_PROMPT) == 1
    assert world.scheduled_since(mark) == []


async def test_a_restored_question_answer_continues_the_turn_without_recall(
    make_world: Any,
) -> None:
    world = make_world()
    question = {
        "questions": [{"question": "Which region?", "options": [{"label": "eu"}, {"label": "us"}]}]
    }
    world.server.enqueue(tool_call("ask_user_question", question, id="ask-1"), purpose="main")
    silent = ScriptedFrontend(answers=[NEVER])
    session = world.session(silent)
    running = asyncio.ensure_future(world.prompt(session, DEPLOY_PROMPT))
    await silent.wait_until_asked()
    await world.server.async_wait_for_requests(1, purpose="recall-selector")  # as above
    session.cancel()
    await running
    await session.close()
    await world.settle()
    loaded = world.runtime.load_session(session.id, frontend=ScriptedFrontend(answers=[["eu"]]))
    assert loaded.loaded is not None and pending_question(loaded.loaded) is not None
    mark = world.mark()

    result = await world.prompt(loaded, PromptRequest("", restore_question=True))
    await world.settle()

    assert result.stop_reason == "end_turn" and not result.fresh
    assert world.requests_since(mark, "recall-selector") == []
    assert world.recall_events_since(mark) == []
    [continued] = world.requests_since(mark, "main")
    assert continued.contains("Which region?: eu")
    assert world.scheduled_since(mark) == []


async def test_a_runtime_origin_turn_neither_recalls_nor_runs_prompt_hooks(
    make_world: Any, tmp_path: Path
) -> None:
    world = make_world(**hooks_settings(UserPromptSubmit=hook(tmp_path, "ups", None)))
    session = world.session()
    mark = world.mark()

    result = await world.prompt(
        session, PromptRequest("keep working on the goal", origin="runtime")
    )
    await world.settle()

    assert not result.fresh
    assert world.requests_since(mark, "recall-selector") == []
    assert world.recall_events_since(mark) == []
    assert hook_runs(tmp_path, "ups") == 0
    assert world.scheduled_since(mark) == []


async def test_a_prompt_blocked_by_user_prompt_submit_never_starts_recall(
    make_world: Any, tmp_path: Path
) -> None:
    blocker = hook(tmp_path, "ups", {"decision": "block", "reason": "not today"})
    world = make_world(**hooks_settings(UserPromptSubmit=blocker))
    session = world.session()
    mark = world.mark()

    result = await world.prompt(session, DEPLOY_PROMPT)
    await world.settle()

    assert result.blocked
    assert world.server.requests[mark.requests :] == []
    assert world.recall_events_since(mark) == []
    assert world.scheduled_since(mark) == []


async def test_tool_and_stop_hook_continuations_stay_in_the_one_recall(
    make_world: Any, tmp_path: Path
) -> None:
    stop = hook(tmp_path, "stop", {"decision": "block", "reason": "Run the tests too."}, once=True)
    world = make_world(**hooks_settings(Stop=stop))
    (world.project / "Makefile").write_text("release:\n\techo release\n")
    world.server.enqueue(
        Reply(
            tool_calls=tool_call("read_file", {"file_path": "Makefile"}).tool_calls,
            delay=ANSWER_DELAY,
        ),
        reply("Use make release."),
        reply("Tests pass too."),
        purpose="main",
    )
    session = world.session()
    mark = world.mark()

    result = await world.prompt(session, DEPLOY_PROMPT)

    assert result.stop_reason == "end_turn"
    assert len(world.requests_since(mark, "main")) == 3
    assert len(world.requests_since(mark, "recall-selector")) == 1
    assert len(world.terminal_deliveries_since(mark)) == 1
    assert [n for n, _ in world.telemetry[mark.telemetry :]].count("memory.recall") <= 1
    await world.settle()
    assert world.scheduled_since(mark) == ["dream", "extract"]


@pytest.mark.parametrize("ending", ["cancelled", "failed", "loop_stopped"])
async def test_a_turn_that_does_not_end_normally_finishes_its_recall_and_schedules_nothing(
    make_world: Any, ending: str
) -> None:
    world = make_world()
    session = world.session()
    if ending == "cancelled":
        world.server.enqueue(reply("never arrives", delay=30), purpose="main")
    elif ending == "failed":
        world.server.enqueue(error_reply(400, "bad request"), purpose="main")
    else:
        same = tool_call("list_directory", {"path": "."})
        world.server.enqueue(*[same] * 6, purpose="main")
    mark = world.mark()

    running = asyncio.ensure_future(world.prompt(session, DEPLOY_PROMPT))
    if ending == "cancelled":
        await world.server.async_wait_for_requests(1, purpose="main")
        session.cancel()
    result = await running
    await world.settle()

    expected = {"cancelled": "cancelled", "failed": "error", "loop_stopped": "end_turn"}[ending]
    assert result.stop_reason == expected
    assert result.loop_stopped == (ending == "loop_stopped")
    assert len(world.terminal_deliveries_since(mark)) == 1
    assert world.scheduled_since(mark) == []


# ----- the correctness invariants -----


async def test_the_recall_query_never_includes_user_prompt_submit_context(
    make_world: Any, tmp_path: Path
) -> None:
    context = {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": HOOK_CONTEXT,
        }
    }
    world = make_world(**hooks_settings(UserPromptSubmit=hook(tmp_path, "ups", context)))
    session = world.session()
    mark = world.mark()

    await world.prompt(session, DEPLOY_PROMPT)

    [select] = world.requests_since(mark, "recall-selector")
    assert not select.contains(HOOK_CONTEXT)
    [main] = world.requests_since(mark, "main")
    assert main.contains(HOOK_CONTEXT)


async def test_each_fresh_turn_holds_one_recall_handle(make_world: Any) -> None:
    world = make_world()
    session = world.session()
    mark = world.mark()

    await world.prompt(session, DEPLOY_PROMPT)
    await world.prompt(session, "and what about the code style?")

    assert len(world.requests_since(mark, "recall-selector")) == 2
    assert len(world.terminal_deliveries_since(mark)) == 2


async def test_the_first_request_waits_a_bounded_time_for_a_slow_selector(
    make_world: Any,
) -> None:
    world = make_world()
    world.server.handler = selector("style.md", delay=5.0)
    session = world.session()
    mark = world.mark()

    await world.prompt(session, "tell me a joke about compilers")

    [select] = world.requests_since(mark, "recall-selector")
    [main] = world.requests_since(mark, "main")
    # The selector answers after 5 s; the turn went ahead long before (the wait is ~0.1 s).
    assert main.received_at - select.received_at < 2.0
    assert not main.contains(STYLE_MARKER)


async def test_refined_memory_follows_the_function_responses_and_is_sent_once(
    make_world: Any,
) -> None:
    world = make_world()
    world.server.handler = selector("style.md", delay=0.05)
    (world.project / "Makefile").write_text("release:\n")
    world.server.enqueue(
        Reply(tool_calls=tool_call("read_file", {"file_path": "Makefile"}).tool_calls, delay=0.6),
        tool_call("read_file", {"file_path": "Makefile", "offset": 0}),
        reply("Done."),
        purpose="main",
    )
    session = world.session()
    mark = world.mark()

    await world.prompt(session, DEPLOY_PROMPT)

    first, second, third = world.requests_since(mark, "main")
    assert first.contains(DEPLOY_MARKER) and not first.contains(STYLE_MARKER)
    roles = [m["role"] for m in second.messages]
    memory_at = next(i for i, m in enumerate(second.messages) if STYLE_MARKER in json.dumps(m))
    last_tool_at = max(i for i, role in enumerate(roles) if role == "tool")
    assert memory_at > last_tool_at
    assert roles[memory_at] == "user"
    assert occurrences(third, STYLE_MARKER) == 1


async def test_a_memory_is_surfaced_at_most_once_per_session(make_world: Any) -> None:
    world = make_world()
    session = world.session()
    mark = world.mark()

    await world.prompt(session, DEPLOY_PROMPT)
    await world.prompt(session, DEPLOY_PROMPT)

    first, second = world.requests_since(mark, "main")
    assert occurrences(first, DEPLOY_MARKER) == 1
    assert occurrences(second, DEPLOY_MARKER) == 1  # the earlier turn's copy, in history


async def test_extract_sees_the_history_after_the_last_stop_hook_continuation(
    make_world: Any, tmp_path: Path
) -> None:
    stop = hook(tmp_path, "stop", {"decision": "block", "reason": "Double-check it."}, once=True)
    world = make_world(**hooks_settings(Stop=stop))
    world.server.enqueue(reply("First answer."), reply("FINAL-ANSWER-5521"), purpose="main")
    session = world.session()
    mark = world.mark()

    await world.prompt(session, DEPLOY_PROMPT)
    await world.settle()

    extract = world.requests_since(mark, "extract")
    assert extract
    assert extract[0].contains("FINAL-ANSWER-5521")


async def test_extract_is_scheduled_once_for_a_turn_with_tools_and_continuations(
    make_world: Any, tmp_path: Path
) -> None:
    stop = hook(tmp_path, "stop", {"decision": "block", "reason": "Again."}, once=True)
    world = make_world(**hooks_settings(Stop=stop))
    world.server.enqueue(
        tool_call("list_directory", {"path": "."}), reply("One."), reply("Two."), purpose="main"
    )
    session = world.session()
    mark = world.mark()

    await world.prompt(session, DEPLOY_PROMPT)
    await world.settle()

    assert world.scheduled_since(mark) == ["dream", "extract"]


async def test_the_turn_ends_without_waiting_for_extract(make_world: Any) -> None:
    world = make_world()
    world.server.enqueue(reply("Noted.", delay=30), purpose="extract")
    session = world.session()
    mark = world.mark()

    result = await asyncio.wait_for(world.prompt(session, DEPLOY_PROMPT), DEADLINE_SECONDS)

    assert result.stop_reason == "end_turn"
    await world.server.async_wait_for_requests(1, purpose="extract", timeout=10)
    assert world.requests_since(mark, "extract")


async def test_a_cancel_that_arrives_while_the_turn_starts_still_cancels_it(
    make_world: Any,
) -> None:
    """Regression: Session.cancel() returned False (and the turn ran on) when it came while the
    sink was still taking TurnStarted, before the turn task existed (an ACP session/cancel can
    arrive at exactly that moment)."""
    world = make_world()
    session = world.session()
    mark = world.mark()
    cancelled: list[bool] = []

    async def sink(event: SessionEvent) -> None:
        if type(event).__name__ == "TurnStarted":
            await asyncio.sleep(0)  # the sink is slow: an ACP notification being written
            cancelled.append(session.cancel())

    result = await session.prompt(PromptRequest(DEPLOY_PROMPT), sink)
    await world.settle()

    assert cancelled == [True]
    assert result.stop_reason == "cancelled"
    assert world.requests_since(mark, "main") == []
    assert world.scheduled_since(mark) == []
