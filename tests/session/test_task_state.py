"""The task checkpoint of a session: kept up to date after turns, recorded, read back on resume,
and used by compression, /recap and a resume after a crash.

A real Session and Runtime over the in-process scripted model; what is observed is the requests
the model received, the recording, and what the session shows.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn.agent.task_checkpoint import TASK_CHECKPOINT_PURPOSE, TaskCheckpoint
from cairn.content import Content, FunctionCall
from cairn.recording.records import TASK_CHECKPOINT, parse_records
from cairn.session import task_state as task_state_module
from cairn.session.session import Session
from cairn.testing import ToolCallSpec, error_reply, reply, tool_calls
from cairn.vocabulary.events import Notice, RecapShown

from ..polling import eventually_async
from .helpers import MakeWorld, World

pytestmark = pytest.mark.timeout(60)

CORRECTION = "No, don't touch tests/legacy/: that folder is frozen until the release."


def checkpoint_reply(hold: threading.Event | None = None, **fields: Any) -> Any:
    answer = {
        "objective": "Rename the config loader.",
        "instructions": [],
        "done": [{"step": "Renamed load_config", "evidence": "edited src/config.py"}],
        "remaining": ["update the callers"],
        "next_step": "Update the callers in src/app.py.",
        "open_questions": [],
        "knowledge": ["the loader lives in src/config.py"],
        "recap": "Renaming the config loader. Next: update the callers in src/app.py.",
    }
    answer.update(fields)
    return reply(json.dumps(answer), hold=hold)


def checkpoint_requests(world: World) -> list[Any]:
    return world.provider.requests_for(TASK_CHECKPOINT_PURPOSE)


def recorded_checkpoints(session: Session) -> list[dict[str, Any]]:
    assert session.recorder is not None and session.recorder.path is not None
    records, _ = parse_records(session.recorder.path.read_bytes())
    return [r["systemPayload"] for r in records if r.get("subtype") == TASK_CHECKPOINT]


async def test_a_checkpoint_keeps_the_users_instructions_word_for_word(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config to read_config everywhere.")
    await world.prompt(session, CORRECTION)
    # The model names the correction by number and misquotes it: the user's own words are kept.
    world.provider.enqueue(
        checkpoint_reply(instructions=[{"id": 2, "quote": "don't touch the legacy tests"}]),
        purpose=TASK_CHECKPOINT_PURPOSE,
    )

    checkpoint = await session.task_state.update_now()

    assert checkpoint is not None
    assert [(i.turn, i.text) for i in checkpoint.instructions] == [(2, CORRECTION)]
    assert checkpoint.next_step == "Update the callers in src/app.py."
    assert session.task_state.fresh
    [request] = checkpoint_requests(world)
    assert CORRECTION in request.contents[-1].text  # what happened since, for the model
    [recorded] = recorded_checkpoints(session)
    assert TaskCheckpoint.from_record(recorded) == checkpoint


async def test_a_quote_found_in_a_long_message_is_kept_as_the_user_wrote_it(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    rule = "Always   run ruff before you commit."
    long_message = "Here is the log:\n" + "line of output\n" * 300 + rule
    await world.prompt(session, long_message)
    world.provider.enqueue(
        checkpoint_reply(instructions=[{"id": 1, "quote": "Always run ruff before you commit."}]),
        purpose=TASK_CHECKPOINT_PURPOSE,
    )

    checkpoint = await session.task_state.update_now()

    assert checkpoint is not None
    assert [i.text for i in checkpoint.instructions] == ["Always   run ruff before you commit."]


async def test_the_checkpoint_is_brought_up_to_date_once_the_session_is_quiet(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_state_module, "IDLE_SECONDS", 0.01)
    world = make_world()
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    session = world.session()

    await world.prompt(session, "Rename load_config.")

    assert await eventually_async(lambda: session.task_state.fresh)
    assert len(checkpoint_requests(world)) == 1
    await world.prompt(session, "/help")  # reaches no model: nothing for the checkpoint
    await world.prompt(session, "/memory")
    assert await eventually_async(lambda: session.task_state.fresh)
    assert len(checkpoint_requests(world)) == 1


async def test_back_to_back_turns_ask_for_at_most_one_checkpoint_each(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_state_module, "IDLE_SECONDS", 0.01)
    world = make_world()
    world.provider.enqueue(*(checkpoint_reply() for _ in range(5)), purpose=TASK_CHECKPOINT_PURPOSE)
    session = world.session()

    for number in range(5):
        await world.prompt(session, f"step {number}")

    assert await eventually_async(lambda: session.task_state.fresh)
    assert 1 <= len(checkpoint_requests(world)) <= 5


@pytest.mark.parametrize(
    "answer",
    [
        error_reply(500, "overloaded"),
        reply("Sure! Here is where the task stands: all good."),  # not JSON
        reply(json.dumps({"objective": 42, "next_step": None})),  # not a checkpoint
        reply(json.dumps(["a", "list"])),
    ],
    ids=["failing", "prose", "wrong-types", "a-list"],
)
async def test_a_failed_checkpoint_query_leaves_the_previous_checkpoint(
    make_world: MakeWorld, answer: Any
) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config.")
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    before = await session.task_state.update_now()
    await world.prompt(session, "Now the callers.")
    world.provider.enqueue(answer, purpose=TASK_CHECKPOINT_PURPOSE)

    after = await session.task_state.update_now()

    assert after is before is not None
    assert not session.task_state.fresh
    assert len(recorded_checkpoints(session)) == 1
    result = await world.prompt(session, "and go on")  # the turn is not affected
    assert result.stop_reason == "end_turn"


async def test_a_checkpoint_query_that_times_out_leaves_the_previous_checkpoint(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_state_module, "CHECKPOINT_TIMEOUT_SECONDS", 0.2)
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config.")
    never = threading.Event()
    world.provider.enqueue(checkpoint_reply(hold=never), purpose=TASK_CHECKPOINT_PURPOSE)

    try:
        assert await session.task_state.update_now(timeout=30) is None
    finally:
        never.set()

    assert recorded_checkpoints(session) == []
    assert (await world.prompt(session, "go on")).stop_reason == "end_turn"


async def test_a_checkpoint_holds_no_secret_the_conversation_did_not(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_API_TOKEN", "tok-7f3a9c2e5b1d")
    world = make_world()
    session = world.session()
    await world.prompt(session, "Use the staging key sk-live-Aa11Bb22Cc33Dd44Ee55 for the test.")
    world.provider.enqueue(
        checkpoint_reply(
            knowledge=[
                "the staging key is sk-live-Aa11Bb22Cc33Dd44Ee55",  # from the conversation
                "the prod key is sk-prod-Zz99Yy88Xx77Ww66Vv55",  # invented
                "the deploy token is tok-7f3a9c2e5b1d",  # the environment's
                "AKIAABCDEFGHIJKLMNOP is the AWS key",  # invented
            ]
        ),
        purpose=TASK_CHECKPOINT_PURPOSE,
    )

    checkpoint = await session.task_state.update_now()

    assert checkpoint is not None
    assert checkpoint.knowledge == (
        "the staging key is sk-live-Aa11Bb22Cc33Dd44Ee55",
        "the prod key is [redacted]",
        "the deploy token is [redacted]",
        "[redacted] is the AWS key",
    )


# ----- the recording -----


async def test_a_resumed_session_has_its_checkpoint_and_the_users_words(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config.")
    await world.prompt(session, CORRECTION)
    world.provider.enqueue(
        checkpoint_reply(instructions=[{"id": 2}]), purpose=TASK_CHECKPOINT_PURPOSE
    )
    checkpoint = await session.task_state.update_now()
    await session.close()

    resumed = world.load(session.id)

    assert resumed.task_state.checkpoint == checkpoint
    assert resumed.task_state.fresh
    assert [w.text for w in resumed.task_state.words] == ["Rename load_config.", CORRECTION]
    assert resumed.task_state.resume_note is None  # the last turn finished


async def test_a_checkpoint_edited_by_hand_is_ignored_with_one_warning(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config.")
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    await session.task_state.update_now()
    await session.close()
    assert session.recorder is not None and session.recorder.path is not None
    path: Path = session.recorder.path
    path.write_text(path.read_text().replace("Update the callers", "Delete the callers"))

    resumed = world.load(session.id)
    await world.prompt(resumed, "go on")

    assert resumed.task_state.checkpoint is None
    warnings = [e.text for e in world.events if isinstance(e, Notice) and e.level == "warning"]
    assert len([w for w in warnings if "task checkpoint" in w]) == 1
    assert "edited by hand" in warnings[0]
    assert "Delete the callers" not in "\n".join(c.text for c in world.last_main().contents)


# ----- what reads it -----


async def test_recap_from_a_fresh_checkpoint_asks_no_model(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config.")
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    await session.task_state.update_now()
    asked = len(world.provider.requests)

    result = await world.prompt(session, "/recap")

    assert result.text == "Renaming the config loader. Next: update the callers in src/app.py."
    assert [e.text for e in world.events if isinstance(e, RecapShown)] == [result.text]
    assert len(world.provider.requests) == asked


async def test_recap_asks_the_model_when_the_checkpoint_is_behind(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config.")
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    await session.task_state.update_now()
    await world.prompt(session, "Now the callers.")  # the checkpoint is one turn behind
    world.provider.enqueue(reply("<recap>Updating the callers.</recap>"), purpose="recap")

    result = await world.prompt(session, "/recap")

    assert result.text == "Updating the callers."
    assert len(world.provider.requests_for("recap")) == 1


async def test_compression_puts_the_checkpoint_in_place_of_the_older_history(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.provider.enqueue(*(reply(f"ANSWER-{i}") for i in range(4)), purpose="main")
    session = world.session()
    await world.prompt(session, "Rename load_config: " + "context " * 60)
    await world.prompt(session, CORRECTION + " " + "context " * 60)
    await world.prompt(session, "Next, the callers: " + "context " * 60)
    await world.prompt(session, "And the docs: " + "context " * 60)
    world.provider.enqueue(
        checkpoint_reply(instructions=[{"id": 2, "quote": CORRECTION}]),
        purpose=TASK_CHECKPOINT_PURPOSE,
    )

    await world.prompt(session, "/compress")
    await world.prompt(session, "go on")

    assert world.provider.requests_for("compress") == []  # no model-written summary
    sent = "\n".join(c.text for c in world.last_main().contents)
    assert "<task_checkpoint" in sent
    assert f"[turn 2] {CORRECTION}" in sent
    assert "Next step: Update the callers in src/app.py." in sent
    assert "ANSWER-0" not in sent


# ----- a resume after a crash -----


async def test_a_session_stopped_during_a_tool_call_says_where_it_stood_on_resume(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "Rename load_config.")
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    await session.task_state.update_now()
    # The next turn's answer calls a tool; the process dies before its result is recorded.
    assert session.recorder is not None
    session.recorder.record_user(Content.user("Now run the tests."))
    call = FunctionCall("call_1", "run_shell_command", {"command": "pytest -q"})
    session.recorder.record_assistant(Content("model", [call]), model="m")
    session.recorder.close()

    resumed = world.load(session.id)
    await world.prompt(resumed, "continue")

    note = resumed.task_state.resume_note
    assert note is not None
    assert note.startswith(
        "The last turn did not finish: cairn stopped while running run_shell_command."
    )
    assert "Renaming the config loader. Next: update the callers" in note
    assert note.endswith("Send “continue” to go on.")
    assert resumed.loaded is not None and resumed.loaded.items[-1].text == note
    sent = "\n".join(c.text for c in world.last_main().contents)
    assert "The previous cairn process stopped before the last turn finished" in sent
    assert "Next step: Update the callers in src/app.py." in sent
    second = await world.prompt(resumed, "and then?")  # only the first request carries it
    assert second.stop_reason == "end_turn"
    assert "previous cairn process stopped" not in world.last_main().contents[-1].text


async def test_tool_calls_in_the_checkpoint_come_from_the_conversation(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world(tools={"approvalMode": "yolo"})
    world.provider.enqueue(
        tool_calls(
            ToolCallSpec("write_file", {"file_path": str(project / "notes.md"), "content": "x"}),
            ToolCallSpec("run_shell_command", {"command": "echo hi"}),
        ),
        reply("Done."),
        purpose="main",
    )
    session = world.session(approval_mode="yolo")
    await world.prompt(session, "Write notes.md and say hi.")
    world.provider.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)

    checkpoint = await session.task_state.update_now()

    assert checkpoint is not None
    assert checkpoint.files_changed == (str(project / "notes.md"),)
    assert checkpoint.commands == ("`echo hi` → exit 0",)
