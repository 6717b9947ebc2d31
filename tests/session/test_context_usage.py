"""``/context`` and ``/usage``: what fills the context window, by part, and the tokens each
purpose used (per session, per day), over a real Session and Runtime with the scripted model.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from cairn.agent.task_checkpoint import TASK_CHECKPOINT_PURPOSE
from cairn.llm.ledger import UsageLedger
from cairn.llm.openai.format import build_request_body
from cairn.llm.types import Finished, ModelRequest, Usage
from cairn.session import task_state as task_state_module
from cairn.session.context_usage import context_report, usage_report
from cairn.session.session import PromptRequest
from cairn.testing import Reply, ScriptedProvider, ToolCallSpec, reply, tool_calls
from cairn.vocabulary.events import SessionEvent

from ..polling import eventually_async
from .helpers import MakeWorld
from .test_task_state import checkpoint_reply

pytestmark = pytest.mark.timeout(60)


def wire_tokens(request: ModelRequest) -> int:
    """The prompt as an OpenAI-compatible server would see it, at 4 characters a token: every
    message's text, the tool calls' names and arguments, the tool declarations as JSON."""
    body = build_request_body(request)
    chars = 0
    for message in body["messages"]:
        content = message.get("content") or ""
        if isinstance(content, str):
            chars += len(content)
        else:
            chars += sum(len(part.get("text", "")) for part in content)
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    tools = [tool["function"] for tool in body.get("tools") or []]
    chars += sum(len(json.dumps(tool)) for tool in tools)
    return chars // 4


def counting(answer: Reply) -> Any:
    """A handler answering ``answer`` with the prompt counted as the wire holds it."""

    def handle(request: ModelRequest) -> Reply | None:
        if request.purpose != "main":
            return None
        usage = {"prompt_tokens": wire_tokens(request), "completion_tokens": 5}
        return dataclasses.replace(answer, usage=usage)

    return handle


async def _ignore(event: SessionEvent) -> None:
    return None


async def test_context_parts_add_up_to_the_counted_prompt_within_5_percent(
    make_world: MakeWorld, project: Path
) -> None:
    (project / "CAIRN.md").write_text("Use tabs.\n" * 200)
    (project / "notes.txt").write_text("a line of notes\n" * 400)
    answers = iter(
        [
            tool_calls(ToolCallSpec("read_file", {"file_path": str(project / "notes.txt")})),
            reply("Done."),
        ]
    )
    provider = ScriptedProvider(handler=lambda request: counting(next(answers))(request))
    world = make_world(provider=provider)
    session = world.session()

    attachments = await session.attach_text("Read @notes.txt, then notes.txt with the tool.")
    await session.prompt(PromptRequest.attaching(attachments), _ignore)

    last = provider.requests[-1]
    counted = session.client.last_prompt_tokens
    assert counted == wire_tokens(last)
    report = context_report(session)
    parts = {part.name: part.tokens for part in report.parts}
    assert {"system prompt", "context files", "tools", "attachments", "conversation"} <= set(parts)
    assert parts["attachments"] >= len("a line of notes\n" * 400) // 4 - 10
    assert abs(report.estimated - counted) <= 0.05 * counted
    assert report.counted == counted
    assert report.warning is None


async def test_context_warns_before_the_window_overflows(make_world: MakeWorld) -> None:
    world = make_world(model={"generationConfig": {"contextWindowSize": 6000}})
    session = world.session()

    await world.prompt(session, "x" * 22_000)

    text = (await world.prompt(session, "/context")).text
    assert "Warning: The context window is" in text
    assert "may not fit" in text
    assert context_report(session).to_dict()["warning"] is not None


async def test_usage_by_purpose_counts_the_main_turn_and_the_checkpoint_apart(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_state_module, "IDLE_SECONDS", 0.01)
    world = make_world()
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    session = world.session()

    await world.prompt(session, "Rename load_config.")
    assert await eventually_async(lambda: session.task_state.fresh)

    report = usage_report(session)
    main, checkpoint = report["session"]["main"], report["session"][TASK_CHECKPOINT_PURPOSE]
    assert main["input_tokens"] == session.client.stats.usage.input_tokens > 0
    assert checkpoint["input_tokens"] > 0
    assert list(report["session"]) == ["main", TASK_CHECKPOINT_PURPOSE]
    assert report["today"] == report["session"]  # the only session of this home today
    shown = (await world.prompt(session, "/usage")).text
    assert "task-checkpoint" in shown and "This session" in shown and "Today" in shown


async def test_the_days_usage_is_shared_by_every_process_of_a_home(
    make_world: MakeWorld, project: Path
) -> None:
    first, second = make_world(), make_world()  # two runtimes: two processes' ledgers
    await first.prompt(first.session(), "one")
    await second.prompt(second.session(), "two")

    day = first.runtime.usage.day()
    expected = sum(
        r["main"]["input_tokens"]
        for r in (usage_report(s)["session"] for s in (*first.sessions, *second.sessions))
    )
    assert day["main"].input_tokens == expected
    assert second.runtime.usage.day() == day


async def test_a_damaged_line_of_the_day_file_is_skipped(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path / "usage", clock=lambda: 1_780_000_000.0)
    request = ModelRequest(model="m", contents=[], purpose="extract", session_id="s")
    ledger.record(request, Usage(input_tokens=100, output_tokens=7))
    path = tmp_path / "usage" / f"{ledger.today().isoformat()}.jsonl"
    with path.open("a") as file:
        file.write('{"purpose": "main", "input_tokens": -4}\nnot json at all\n[1, 2]\n')
    ledger.record(request, Usage(input_tokens=50, output_tokens=3))

    day = ledger.day()
    assert list(day) == ["extract"]
    assert (day["extract"].input_tokens, day["extract"].output_tokens) == (150, 10)


def test_the_day_file_and_its_private_folder_are_made_by_the_first_answer(tmp_path: Path) -> None:
    folder = tmp_path / "home" / "usage"
    ledger = UsageLedger(folder, clock=lambda: 1_780_000_000.0)
    request = ModelRequest(model="m", contents=[], purpose="main", session_id="s")

    ledger.record(request, Usage(input_tokens=7, output_tokens=1))
    ledger.record(request, Usage(input_tokens=5, output_tokens=2))

    assert folder.stat().st_mode & 0o777 == 0o700
    assert ledger.day()["main"].input_tokens == 12


async def test_a_day_file_that_cannot_be_written_leaves_the_request_alone(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "usage-is-a-file"
    blocked.write_text("")
    provider = ScriptedProvider(reply("fine"))
    ledger = UsageLedger(blocked, clock=lambda: 1_780_000_000.0)
    ledger.watch(provider)
    request = ModelRequest(model="m", contents=[], purpose="main", session_id="s")

    events = [event async for event in provider.stream(request)]

    assert isinstance(events[-1], Finished)
    assert ledger.day() == {}
    assert ledger.session("s")["main"].input_tokens > 0


async def test_usage_says_the_cost_by_purpose_when_the_models_are_priced(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_state_module, "IDLE_SECONDS", 0.01)
    prices = {"scripted-model": {"input": 2, "output": 8, "cachedInput": 0.5}}
    world = make_world(model={"prices": prices})
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    session = world.session()

    await world.prompt(session, "Rename load_config.")
    assert await eventually_async(lambda: session.task_state.fresh)

    main = usage_report(session)["session"]["main"]
    expected = (main["input_tokens"] * 2 + main["output_tokens"] * 8) / 1_000_000
    assert main["cost_usd"] == pytest.approx(expected)
    assert "$" in (await world.prompt(session, "/usage")).text


async def test_a_purpose_on_an_unpriced_model_has_no_cost(make_world: MakeWorld) -> None:
    world = make_world(model={"prices": {"another-model": {"input": 1, "output": 1}}})
    session = world.session()

    await world.prompt(session, "hello")

    assert "cost_usd" not in usage_report(session)["session"]["main"]
    assert "$" not in (await world.prompt(session, "/usage")).text
