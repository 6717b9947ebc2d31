"""The turn's two Recall delivery points (cairn.session.turn): memory ready within 100 ms goes
with the prompt; memory refined meanwhile joins the next tool results, right after the function
responses, at the final send point (after every gate that could still drop the request).

The Recall handle here is the recording double of tests/recall_helpers.py, attached to a real
session (memory off, so no real handle competes with it); the model is the scripted provider.
"""

from __future__ import annotations

from cairn.agent.reminders import steering_text, system_reminder
from cairn.content import FunctionResponse, Part
from cairn.llm.types import ModelRequest
from cairn.session.session import PromptRequest, Session
from cairn.testing import ToolCallSpec, reply, tool_call, tool_calls
from cairn.vocabulary.events import MemoryRecalled, SessionEvent

from ..recall_helpers import RecordingRecall
from .helpers import MakeWorld, World

RECALLED = RecordingRecall().prompt or ""


def _recalling(world: World, recall: RecordingRecall) -> Session:
    session = world.session()
    session.client.attach_recall(lambda: recall)
    return session


async def _ignore(event: SessionEvent) -> None:
    return None


def _last_user_parts(request: ModelRequest) -> list[Part]:
    last = request.contents[-1]
    assert last.role == "user"
    return list(last.parts)


async def test_recall_joins_the_tool_results_right_after_the_function_responses(
    make_world: MakeWorld,
) -> None:
    """Moved from tests/agent/test_client.py with the delivery point: steering text typed
    meanwhile follows the recalled memory."""
    world = make_world()
    world.provider.enqueue(tool_call("glob", {"pattern": "*.md"}), reply("ok"), purpose="main")
    recall = RecordingRecall()
    session = _recalling(world, recall)
    assert session.steer("also check the docs")

    result = await world.prompt(session, "deploy it")

    assert result.text == "ok"
    assert recall.consumed == ["initial", "tool_result"]
    parts = _last_user_parts(world.main_requests()[1])
    assert isinstance(parts[0], FunctionResponse)
    assert parts[1:] == [system_reminder(RECALLED), steering_text("also check the docs")]
    shown = [e for e in world.events if isinstance(e, MemoryRecalled)]
    assert [e.phase for e in shown] == ["fast", "refined"]  # the session shows both


async def test_recall_is_told_when_each_request_of_the_turn_is_sent(make_world: MakeWorld) -> None:
    """Recall's refinement waits for the first request to be written (issue #32)."""
    world = make_world()
    world.provider.enqueue(tool_call("glob", {"pattern": "*.md"}), reply("ok"), purpose="main")
    recall = RecordingRecall()
    session = _recalling(world, recall)

    await world.prompt(session, "deploy it")

    assert recall.sent == len(world.main_requests()) == 2


async def test_recall_goes_with_a_fresh_prompt_and_nowhere_without_function_responses(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.provider.enqueue(reply("first"), reply("again"), purpose="main")
    recall = RecordingRecall()
    session = _recalling(world, recall)

    await world.prompt(session, "hi")
    await session.prompt(PromptRequest("", retry=True), _ignore)

    assert recall.consumed == ["initial"]  # a retry is no fresh prompt and sends no results
    first, retried = world.main_requests()
    assert system_reminder(RECALLED) in _last_user_parts(first)
    assert system_reminder(RECALLED) not in _last_user_parts(retried)


async def test_recall_is_not_consumed_when_a_gate_refuses_the_request(
    make_world: MakeWorld,
) -> None:
    world = make_world(model={"sessionTokenLimit": 500})
    heavy = tool_calls(ToolCallSpec("glob", {"pattern": "*.md"}))
    heavy.usage = {"prompt_tokens": 900, "completion_tokens": 5}
    world.provider.enqueue(heavy, purpose="main")
    recall = RecordingRecall()
    session = _recalling(world, recall)

    result = await world.prompt(session, "deploy it")

    assert result.limit == "session_token_limit"
    assert recall.consumed == ["initial"]
    assert len(world.main_requests()) == 1


async def test_an_empty_recall_leaves_the_tool_results_as_they_are(make_world: MakeWorld) -> None:
    world = make_world()
    world.provider.enqueue(tool_call("glob", {"pattern": "*.md"}), reply("ok"), purpose="main")
    recall = RecordingRecall(prompt=None)
    session = _recalling(world, recall)

    await world.prompt(session, "deploy it")

    assert recall.consumed == ["initial", "tool_result"]
    parts = _last_user_parts(world.main_requests()[1])
    assert len(parts) == 1 and isinstance(parts[0], FunctionResponse)


async def test_a_failing_recall_never_stops_the_turn(make_world: MakeWorld) -> None:
    world = make_world()
    world.provider.enqueue(tool_call("glob", {"pattern": "*.md"}), reply("ok"), purpose="main")
    session = _recalling(world, RecordingRecall(fail=True))

    result = await world.prompt(session, "deploy it")

    assert result.stop_reason == "end_turn" and result.text == "ok"
    assert len(world.main_requests()) == 2
