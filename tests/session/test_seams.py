"""What a session offers the parts of cairn around it: a question asked again after a resume,
events outside a turn, turn hooks, and the memory warm-up every front end gets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cairn.agent.client import UNANSWERED_QUESTION_ERROR
from cairn.content import FunctionResponse
from cairn.session.session import PromptRequest, Session
from cairn.session.turn_hooks import TurnHook
from cairn.testing import NEVER, ScriptedFrontend, reply, tool_call
from cairn.vocabulary import (
    ModeChanged,
    Notice,
    SessionEvent,
    TurnResult,
)

from .helpers import MakeWorld, World, write_memory

pytestmark = pytest.mark.timeout(60)

QUESTION = {
    "questions": [
        {"question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
    ]
}


async def ignore(event: SessionEvent) -> None:
    return None


async def left_asking(world: World) -> str:
    """A recorded session whose turn stopped while its question was open (nobody answered)."""
    world.provider.enqueue(tool_call("ask_user_question", QUESTION, id="ask-1"), purpose="main")
    user = ScriptedFrontend(answers=[NEVER])
    session = world.session(frontend=user)
    turn = asyncio.ensure_future(session.prompt(PromptRequest("set up the database"), ignore))
    await user.wait_until_asked()
    session.cancel()
    assert (await turn).stop_reason == "cancelled"
    await session.close()
    return session.id


# ----- a question asked again after any resume -----


async def test_a_resumed_session_asks_its_open_question_again_and_continues_with_the_answer(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session_id = await left_asking(world)
    world.provider.enqueue(reply("Postgres it is."), purpose="main")
    user = ScriptedFrontend(answers=[["Postgres"]])
    loaded = world.runtime.load_session(session_id, frontend=user)

    request = loaded.resume_request()
    assert request is not None and not request.fresh
    result = await loaded.prompt(request, ignore)

    assert result.text == "Postgres it is."
    assert [q.question for ask in user.questions for q in ask] == ["Which database?"]
    last = world.last_main()
    assert "Which database?: Postgres" in str(last.contents[-1].to_dict())
    assert loaded.resume_request() is None  # given once
    await loaded.close()


async def test_a_resume_without_a_person_leaves_the_question_to_the_next_prompt(
    make_world: MakeWorld,
) -> None:
    """`cairn -p --resume` cannot ask: the next prompt answers the question instead."""
    world = make_world()
    session_id = await left_asking(world)
    loaded = world.load(session_id)  # NonInteractive

    assert loaded.resume_request() is None
    await world.prompt(loaded, "use SQLite")

    [answer] = [
        p
        for entry in world.last_main().contents
        for p in entry.parts
        if isinstance(p, FunctionResponse) and p.id == "ask-1"
    ]
    assert answer.response == {"error": UNANSWERED_QUESTION_ERROR}
    assert world.last_main().contents[-1].text.endswith("use SQLite")


async def test_a_session_without_an_open_question_offers_no_resume_turn(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "hello")
    await session.close()

    loaded = world.runtime.load_session(session.id, frontend=ScriptedFrontend())

    assert loaded.pending_question is None and loaded.resume_request() is None


# ----- events outside a turn -----


async def test_a_mode_set_outside_a_turn_reaches_the_listeners_and_a_turns_mode_its_sink(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    heard: list[SessionEvent] = []

    async def listener(event: SessionEvent) -> None:
        heard.append(event)

    stop = session.listen(listener)
    await session.set_approval_mode("plan")
    await world.prompt(session, "/approval-mode auto-edit")
    stop()
    await session.set_approval_mode("default")

    assert heard == [ModeChanged("plan")]
    assert ModeChanged("auto-edit") in world.events


async def test_a_failing_listener_does_not_stop_the_others(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()
    heard: list[SessionEvent] = []

    async def broken(event: SessionEvent) -> None:
        raise RuntimeError("gone")

    async def listener(event: SessionEvent) -> None:
        heard.append(event)

    session.listen(broken)
    session.listen(listener)
    await session.emit(Notice("info", "x"))

    assert heard == [Notice("info", "x")]


# ----- turn hooks -----


class Recording(TurnHook):
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    async def turn_started(self, session: Session, request: PromptRequest) -> None:
        self.seen.append(("started", request.text))

    async def before_change(self, session: Session) -> None:
        self.seen.append(("change", session.todos))

    async def turn_ended(self, session: Session, result: TurnResult) -> None:
        self.seen.append(("ended", result.stop_reason))


async def test_turn_hooks_see_the_turn_and_each_change_before_it_happens(
    make_world: MakeWorld, project: Path
) -> None:
    (project / "a.txt").write_text("alpha\n")
    world = make_world()
    world.provider.enqueue(
        tool_call("read_file", {"file_path": "a.txt"}),
        tool_call("write_file", {"file_path": "b.txt", "content": "beta\n"}),
        reply("Done."),
        purpose="main",
    )
    session = world.session(frontend=ScriptedFrontend(), approval_mode="default")
    hook = Recording()
    session.turn_hooks.append(hook)

    await world.prompt(session, "copy it")

    assert hook.seen == [("started", "copy it"), ("change", []), ("ended", "end_turn")]
    assert (project / "b.txt").read_text() == "beta\n"


async def test_a_failing_turn_hook_is_a_warning_and_the_turn_goes_on(
    make_world: MakeWorld,
) -> None:
    class Broken(TurnHook):
        async def turn_started(self, session: Session, request: PromptRequest) -> None:
            raise OSError("disk full")

    world = make_world()
    session = world.session()
    session.turn_hooks.append(Broken())

    result = await world.prompt(session, "hello")

    assert result.stop_reason == "end_turn"
    assert Notice("warning", "Broken failed: disk full", "turn_hook") in world.events


# ----- memory warm-up -----


async def test_sessions_made_while_memory_warms_up_still_get_the_memory_section(
    make_world: MakeWorld, project: Path
) -> None:
    for index in range(40):
        write_memory(project, f"note-{index}", f"note number {index}", f"body {index}")
    world = make_world(memory=True)
    first = world.session()
    second = world.session()  # most likely while the first one's warm-up still runs

    await world.prompt(second, "hello")
    await world.prompt(first, "hello again")

    for request in world.main_requests():
        assert request.system is not None and "# auto memory" in request.system
        assert "note-0" in request.system  # the index, read after the warm-up
    assert not world.runtime.memory_warming


async def test_closing_the_runtime_waits_for_a_running_warm_up(
    make_world: MakeWorld, project: Path
) -> None:
    for index in range(40):
        write_memory(project, f"note-{index}", f"note number {index}", f"body {index}")
    world = make_world(memory=True)
    world.session()

    await world.runtime.aclose()

    assert not world.runtime.memory_warming
