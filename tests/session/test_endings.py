"""How a turn ends when the model does not simply finish: cut at its output bound, withheld by a
content filter, stopped for a reason of its own, stopped by loop protection, or cancelled.

Issue 33: with finish_reason ``length`` a cut answer was reported as complete
(``end_turn``) by every front end, and the turn's usage was 0 after a loop stop or a cancel.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from cairn.content import FunctionCall, FunctionResponse, Text
from cairn.session.session import PromptRequest
from cairn.testing import Reply, ScriptedProvider, ToolCallSpec, reply, tool_calls
from cairn.vocabulary.events import Notice, SessionEvent

from .helpers import MakeWorld, World


def bounded(main: int) -> dict[str, object]:
    return {"model": {"generationConfig": {"maxOutputTokens": {"main": main}}}}


def notices(world: World, source: str | None = None) -> list[Notice]:
    found = [e for e in world.events if isinstance(e, Notice)]
    return [n for n in found if source is None or n.source == source]


async def test_an_answer_cut_at_its_output_bound_ends_with_max_tokens_and_says_so(
    make_world: MakeWorld,
) -> None:
    provider = ScriptedProvider(Reply(text="The capital of France is ", endless=True))
    world = make_world(provider=provider, **bounded(50))
    session = world.session()

    result = await world.prompt(session, "What is the capital of France?")

    assert result.stop_reason == "max_tokens"
    assert result.finish_reason == "length"
    assert result.usage.output_tokens > 50
    [cut] = notices(world, "output")
    assert cut.level == "warning"
    assert cut.text == (
        "The answer was cut at its output bound of 50 tokens "
        "(model.generationConfig.maxOutputTokens.main); send 'continue' to let the model go on."
    )
    assert provider.requests[0].max_output_tokens == 50


async def test_a_cut_answer_can_be_continued_where_it_stopped(make_world: MakeWorld) -> None:
    provider = ScriptedProvider()
    provider.enqueue(Reply(text="One, two, ", endless=True), reply("three."))
    world = make_world(provider=provider, **bounded(20))
    session = world.session()
    await world.prompt(session, "Count to three.")

    async def sink(event: SessionEvent) -> None:
        world.events.append(event)

    result = await session.prompt(PromptRequest("", continue_turn=True), sink)

    assert result.stop_reason == "end_turn"
    assert result.text == "three."
    continued = provider.requests[-1].contents[-1]
    assert continued.role == "user"
    [prompt] = continued.parts
    assert isinstance(prompt, Text) and "cut at its output bound" in prompt.text


async def test_the_calls_of_a_cut_answer_are_not_run(make_world: MakeWorld) -> None:
    write = ToolCallSpec("write_file", {"file_path": "notes.txt", "content": "half a fi"})
    provider = ScriptedProvider(Reply(tool_calls=[write], finish_reason="length"))
    world = make_world(provider=provider, tools={"approvalMode": "yolo"})
    session = world.session()

    result = await world.prompt(session, "Write the notes.")

    assert result.stop_reason == "max_tokens"
    assert not (world.project / "notes.txt").exists()
    answered = [p for c in session.history for p in c.parts if isinstance(p, FunctionResponse)]
    assert [r.name for r in answered] == ["write_file"]
    assert answered[0].text.startswith("Not run: your answer was cut")
    assert session.client.history.dangling_calls() == []


async def test_a_content_filter_ends_with_refusal(make_world: MakeWorld) -> None:
    provider = ScriptedProvider(Reply(text="I was about to", finish_reason="content_filter"))
    world = make_world(provider=provider)

    result = await world.prompt(world.session(), "Tell me.")

    assert (result.stop_reason, result.finish_reason) == ("refusal", "filter")
    [withheld] = notices(world, "output")
    assert "content filter" in withheld.text


async def test_a_finish_reason_cairn_does_not_know_is_reported_as_it_is(
    make_world: MakeWorld,
) -> None:
    provider = ScriptedProvider(Reply(text="Par", finish_reason="abort"))
    world = make_world(provider=provider)

    result = await world.prompt(world.session(), "Capital?")

    assert (result.stop_reason, result.finish_reason) == ("end_turn", "abort")
    [odd] = notices(world, "output")
    assert odd.text == "The model stopped for a reason cairn does not know: 'abort'."


async def test_a_normal_end_has_no_finish_reason_and_no_notice(make_world: MakeWorld) -> None:
    world = make_world()

    result = await world.prompt(world.session(), "hi")

    assert (result.stop_reason, result.finish_reason) == ("end_turn", None)
    assert notices(world, "output") == []


async def test_a_text_loop_counts_the_usage_of_the_cut_answer(make_world: MakeWorld) -> None:
    sentence = "I will now check the file again to be really sure. "
    provider = ScriptedProvider(reply(chunks=[sentence] * 60))
    world = make_world(provider=provider)

    result = await world.prompt(world.session(), "check " * 100)

    assert result.loop_type == "chanting_identical_sentences"
    assert result.usage.output_tokens > 0 and result.usage.input_tokens > 0


async def test_two_edits_alternating_end_the_turn_as_a_loop(make_world: MakeWorld) -> None:
    a = ToolCallSpec("edit", {"file_path": "a.py", "old_string": "x -  1", "new_string": "x"})
    b = ToolCallSpec("edit", {"file_path": "a.py", "old_string": "x - 1 ", "new_string": "x"})
    provider = ScriptedProvider()
    provider.enqueue(*[tool_calls(a, b, a), tool_calls(b, a, b)] * 5)
    world = make_world(provider=provider, tools={"approvalMode": "yolo"})
    (world.project / "a.py").write_text("y = x - 1\n")

    result = await world.prompt(world.session(), "fix a.py")

    assert result.loop_type in ("repeated_tool_call_cycle", "repeated_tool_failure")
    assert result.requests <= 3  # not 13, as the real model's run took
    assert (world.project / "a.py").read_text() == "y = x - 1\n"


async def test_a_cancelled_turn_counts_the_usage_of_its_cut_answer(make_world: MakeWorld) -> None:
    gate = threading.Event()
    provider = ScriptedProvider(reply(chunks=["Par", "is"], hold=gate))
    world = make_world(provider=provider)
    session = world.session()

    async def sink(event: SessionEvent) -> None:
        world.events.append(event)

    turn = asyncio.ensure_future(session.prompt(PromptRequest("capital? " * 100), sink))
    for _ in range(500):
        if provider.requests:
            break
        await asyncio.sleep(0.01)
    session.cancel()
    gate.set()
    result = await turn

    assert result.stop_reason == "cancelled"
    assert result.usage.input_tokens >= len("capital? " * 100) // 4


async def test_a_window_that_cannot_hold_the_fixed_prompt_is_said_at_the_first_turn(
    make_world: MakeWorld,
) -> None:
    world = make_world(model={"generationConfig": {"contextWindowSize": 1000}})
    session = world.session()

    await world.prompt(session, "hi")
    await world.prompt(session, "again")

    [small] = notices(world, "context")
    assert small.level == "warning"
    assert small.text.startswith("The model's context window (1000 tokens) cannot hold cairn's")
    assert "model.generationConfig.contextWindowSize" in small.text


async def test_a_window_the_server_says_is_too_small_is_said_too(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world(provider=ScriptedProvider(reply("ok"), context_window=800))
    session = world.session()

    await world.prompt(session, "hi")  # the server is asked after the first answer
    await world.prompt(session, "again")

    [small] = notices(world, "context")
    assert small.text.startswith("The model's context window (800 tokens, as the server says)")


async def test_history_calls_are_answered_after_a_cut(make_world: MakeWorld) -> None:
    call = ToolCallSpec("read_file", {"file_path": "a.txt"})
    provider = ScriptedProvider()
    provider.enqueue(Reply(tool_calls=[call], finish_reason="length"), reply("ok"))
    world = make_world(provider=provider)
    session = world.session()

    await world.prompt(session, "read")
    await world.prompt(session, "go on")

    sent = provider.requests[-1].contents
    calls = [p for c in sent for p in c.parts if isinstance(p, FunctionCall)]
    responses = [p for c in sent for p in c.parts if isinstance(p, FunctionResponse)]
    assert [c.id for c in calls] == [r.id for r in responses]
