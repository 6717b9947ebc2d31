"""Slash commands, run through a real Session on a Runtime with the in-process scripted model.

What is observed: the notices and events the session emits, the turn result, and the requests
the scripted model received (or did not).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.agent.prompt import STARTUP_CONTEXT_ACK
from cairn.content import Content
from cairn.llm.types import ModelRequest
from cairn.session.commands import COMMANDS, CommandOutcome, SlashCommand
from cairn.testing import Reply, error_reply, reply
from cairn.vocabulary.events import (
    CommandInfo,
    CommandsChanged,
    ModeChanged,
    Notice,
    TurnResult,
    UsageUpdate,
)

from .helpers import ANSWER, MakeWorld, World, write_memory

pytestmark = pytest.mark.timeout(60)

DEPLOY_MARKER = "MARKER-DEPLOY-5521"
AUTO_MEMORY_HEADING = "# auto memory"


def notices(world: World, source: str) -> list[str]:
    return [e.text for e in world.events if isinstance(e, Notice) and e.source == source]


def last_user_text(request: ModelRequest) -> str:
    last = request.contents[-1]
    assert last.role == "user"
    return last.text


def assert_handled_locally(world: World, result: TurnResult) -> None:
    assert result.handled_locally
    assert result.stop_reason == "end_turn"
    assert world.provider.requests == []


def assert_handled_locally_after(world: World, result: TurnResult, *, requests: int) -> None:
    assert result.handled_locally
    assert len(world.provider.requests) == requests


# ----- /help -----


async def test_help_lists_every_command_without_asking_the_model(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()

    result = await world.prompt(session, "/help")

    assert_handled_locally(world, result)
    [text] = notices(world, "command:help")
    lines = text.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == [f"/{c.name}" for c in session.commands()]
    assert lines[: len(COMMANDS)] == [
        line for line in lines if line.split(" ", 1)[0][1:] in {c.name for c in COMMANDS}
    ]  # the built-ins first, then /skills and /agents
    assert "/memory <on|off> — Show managed memory, or turn it on or off" in lines
    assert result.text == text


async def test_command_names_are_case_insensitive(make_world: MakeWorld) -> None:
    world = make_world()

    result = await world.prompt(world.session(), "/HELP")

    assert_handled_locally(world, result)
    assert notices(world, "command:help")


# ----- /clear -----


async def test_clear_empties_the_history_to_the_startup_context(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()
    await world.prompt(session, "remember the number 42")
    assert len(session.history) == 4

    result = await world.prompt(session, "/clear")

    assert_handled_locally_after(world, result, requests=1)
    assert notices(world, "command:clear") == ["Started a fresh conversation."]
    assert [c.role for c in session.history] == ["user", "model"]
    assert session.history[1] == Content.model(STARTUP_CONTEXT_ACK)
    assert "I'm currently working in the directory" in session.history[0].text
    await world.prompt(session, "what was the number?")
    assert "remember the number 42" not in json.dumps(
        [c.to_dict() for c in world.last_main().contents]
    )


async def test_clear_lets_surfaced_memories_be_recalled_again(
    make_world: MakeWorld, project: Path
) -> None:
    write_memory(
        project, "deploy", "how we deploy the billing service", f"{DEPLOY_MARKER}: `make release`."
    )
    world = make_world(memory=True)
    world.provider.handler = _selector_chooses_nothing
    world.runtime.memory_manager().search("deploy")  # warm the index: fast Recall is immediate
    session = world.session()
    question = "how do we deploy the billing service?"

    await world.prompt(session, question)
    first = last_user_text(world.last_main())
    await world.prompt(session, question)
    second = last_user_text(world.last_main())
    await world.prompt(session, "/clear")
    await world.prompt(session, question)
    third = last_user_text(world.last_main())
    await world.settle()

    assert DEPLOY_MARKER in first
    assert DEPLOY_MARKER not in second  # a memory reaches the model once per conversation
    assert DEPLOY_MARKER in third


def _selector_chooses_nothing(request: ModelRequest) -> Reply | None:
    if request.purpose == "recall-selector":
        return reply(json.dumps({"selected_memories": []}))
    return None


# ----- /compress -----


async def test_compress_reports_a_compressed_conversation(make_world: MakeWorld) -> None:
    world = make_world()
    summary = reply(
        "<state_snapshot>numbers</state_snapshot>",
        usage={"prompt_tokens": 1500, "completion_tokens": 20},  # the summary is much smaller
    )
    world.provider.enqueue(summary, purpose="compress")
    session = world.session()
    for i in range(4):
        await world.prompt(session, f"question {i}: " + "words " * 50)

    result = await world.prompt(session, "/compress")

    assert result.handled_locally
    [text] = notices(world, "command:compress")
    assert text.startswith("Compressed the conversation: ")
    assert text.endswith(" tokens.")
    assert len(world.provider.requests_for("compress")) == 1
    [summary] = [c.text for c in session.history if "<state_snapshot>" in c.text]
    assert summary.startswith("<state_snapshot>numbers</state_snapshot>")
    assert "question 0: words" in summary  # the user's words stay, word for word


async def test_compress_reports_when_there_is_nothing_to_compress(make_world: MakeWorld) -> None:
    world = make_world()

    result = await world.prompt(world.session(), "/compress")

    assert_handled_locally(world, result)
    assert notices(world, "command:compress") == ["Nothing to compress yet."]


async def test_compress_reports_a_failed_compression(make_world: MakeWorld) -> None:
    world = make_world()
    world.provider.enqueue(error_reply(400, "context too long"), purpose="compress")
    session = world.session()
    for i in range(4):
        await world.prompt(session, f"question {i}: " + "words " * 50)

    await world.prompt(session, "/compress")

    [text] = notices(world, "command:compress")
    assert text.startswith("Could not compress the conversation: ")
    assert "context too long" in text


async def test_compress_and_clear_tell_front_ends_the_new_context_size(
    make_world: MakeWorld,
) -> None:
    """Regression: after /compress no usage update followed, so context figures went stale."""
    world = make_world()
    summary = reply(
        "<state_snapshot>numbers</state_snapshot>",
        usage={"prompt_tokens": 1500, "completion_tokens": 20},
    )
    world.provider.enqueue(summary, purpose="compress")
    session = world.session()
    for i in range(4):
        await world.prompt(session, f"question {i}: " + "words " * 50)
    before = [e for e in world.events if isinstance(e, UsageUpdate)][-1].context_tokens

    await world.prompt(session, "/compress")
    after_compress = [e for e in world.events if isinstance(e, UsageUpdate)][-1]
    compressed_to = session.client.last_prompt_tokens
    await world.prompt(session, "/clear")
    after_clear = [e for e in world.events if isinstance(e, UsageUpdate)][-1]

    assert 0 < after_compress.context_tokens < before
    assert after_compress.context_tokens == compressed_to
    assert after_clear.context_tokens == 0
    assert after_clear.context_window == after_compress.context_window > 0


# ----- /model -----


async def test_model_without_a_name_shows_the_current_model(make_world: MakeWorld) -> None:
    world = make_world()

    result = await world.prompt(world.session(), "/model")

    assert_handled_locally(world, result)
    assert notices(world, "command:model") == [
        "Current model: scripted-model. Switch with /model <name>."
    ]


async def test_model_switches_the_model_of_the_next_request(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()

    await world.prompt(session, "/model big-model")
    await world.prompt(session, "hello")

    assert notices(world, "command:model") == ["Model set to big-model."]
    assert world.last_main().model == "big-model"


# ----- /approval-mode -----


async def test_approval_mode_without_a_value_shows_the_mode(make_world: MakeWorld) -> None:
    world = make_world()

    await world.prompt(world.session(), "/approval-mode")

    assert notices(world, "command:approval-mode") == [
        "Approval mode: default (one of plan, default, auto-edit, yolo)."
    ]


async def test_approval_mode_sets_the_mode_and_reports_the_change(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()

    result = await world.prompt(session, "/approval-mode auto-edit")

    assert_handled_locally(world, result)
    assert session.approval_mode == "auto-edit"
    assert [e for e in world.events if isinstance(e, ModeChanged)] == [ModeChanged("auto-edit")]
    assert notices(world, "command:approval-mode") == ["Approval mode set to auto-edit."]


async def test_approval_mode_plan_reaches_the_next_request(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()

    await world.prompt(session, "/approval-mode plan")
    await world.prompt(session, "refactor the parser")

    assert "Plan mode is active" in last_user_text(world.last_main())


async def test_approval_mode_refuses_an_unknown_mode(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()

    await world.prompt(session, "/approval-mode fast")

    assert session.approval_mode == "default"
    assert not any(isinstance(e, ModeChanged) for e in world.events)
    assert notices(world, "command:approval-mode") == [
        "Unknown approval mode 'fast'; use one of plan, default, auto-edit, yolo."
    ]


# ----- /remember -----


async def test_remember_becomes_a_fresh_model_bound_turn(make_world: MakeWorld) -> None:
    world = make_world(memory=True)

    result = await world.prompt(world.session(), "/remember we deploy on Tuesdays")

    assert not result.handled_locally
    assert result.fresh
    assert result.text == ANSWER
    [request] = world.main_requests()
    text = last_user_text(request)
    assert text.startswith(
        "The user asks you to remember this for future sessions:\n\nwe deploy on Tuesdays\n\n"
    )
    manager = world.runtime.memory_manager()
    for scope, root in manager.root_map().items():
        assert f"- {scope} memory: {root}" in text
    assert notices(world, "command:remember") == []


async def test_remember_with_memory_off_says_nothing_can_be_saved(make_world: MakeWorld) -> None:
    world = make_world(memory=False)

    result = await world.prompt(world.session(), "/remember we deploy on Tuesdays")

    assert_handled_locally(world, result)
    assert notices(world, "command:remember") == [
        "Managed memory is off, so nothing can be saved. `/memory on`."
    ]


async def test_remember_without_text_explains_its_use(make_world: MakeWorld) -> None:
    world = make_world()

    result = await world.prompt(world.session(), "/remember   ")

    assert_handled_locally(world, result)
    assert notices(world, "command:remember") == ["Usage: /remember <what to remember>"]


# ----- /memory -----


async def test_memory_off_and_on_toggles_the_memory_section_of_the_system_prompt(
    make_world: MakeWorld,
) -> None:
    world = make_world(memory=True)
    world.provider.handler = _selector_chooses_nothing
    session = world.session()

    await world.prompt(session, "first")
    with_memory = world.last_main().system or ""
    await world.prompt(session, "/memory off")
    await world.prompt(session, "second")
    without_memory = world.last_main().system or ""
    await world.prompt(session, "/memory on")
    await world.prompt(session, "third")
    again = world.last_main().system or ""
    await world.settle()

    assert AUTO_MEMORY_HEADING in with_memory
    assert AUTO_MEMORY_HEADING not in without_memory
    assert AUTO_MEMORY_HEADING in again
    assert notices(world, "command:memory") == [
        "Managed memory is now off for this process.",
        "Managed memory is now on for this process.",
    ]


async def test_memory_on_in_a_session_started_without_memory_starts_recall(
    make_world: MakeWorld, project: Path
) -> None:
    """Regression: a session created with memory off had no Recall handle, so `/memory on`
    added the memory section to the prompt but never recalled a memory in that session."""
    write_memory(
        project, "deploy", "how we deploy the billing service", f"{DEPLOY_MARKER}: `make release`."
    )
    world = make_world(memory=False)
    world.provider.handler = _selector_chooses_nothing
    session = world.session()

    await world.prompt(session, "/memory on")
    world.runtime.memory_manager().search("deploy")  # warm the index: fast Recall is immediate
    await world.prompt(session, "how do we deploy the billing service?")
    await world.settle()

    assert AUTO_MEMORY_HEADING in (world.last_main().system or "")
    assert DEPLOY_MARKER in last_user_text(world.last_main())


async def test_memory_lists_the_memories_when_on(make_world: MakeWorld, project: Path) -> None:
    write_memory(project, "deploy", "how we deploy", "make release")
    world = make_world(memory=True)

    result = await world.prompt(world.session(), "/memory")

    assert_handled_locally(world, result)
    [text] = notices(world, "command:memory")
    assert text.splitlines()[0] == "Managed memory is on: 1 memory."
    assert "- [project] deploy (project: project/deploy.md)" in text


async def test_memory_says_where_the_memories_are_kept(make_world: MakeWorld) -> None:
    """Regression: with no memories yet `/memory` said only "on: 0 memories", not where they
    would be written or could be edited by hand."""
    world = make_world(memory=True)

    await world.prompt(world.session(), "/memory")

    [text] = notices(world, "command:memory")
    roots = world.runtime.memory_manager().root_map()
    assert text.splitlines()[0] == "Managed memory is on: 0 memories."
    for scope, root in roots.items():
        assert f"- {scope} memory: {root}" in text


async def test_memory_says_how_to_turn_it_on_when_off(make_world: MakeWorld) -> None:
    world = make_world(memory=False)

    await world.prompt(world.session(), "/memory")

    assert notices(world, "command:memory") == ["Managed memory is off. `/memory on` turns it on."]


# ----- not a command, or a failing one -----


async def test_an_unknown_command_is_answered_unknown_and_never_reaches_the_model(
    make_world: MakeWorld,
) -> None:
    """Regression: only the terminal UI refused unknown commands; elsewhere they went to the
    model as text."""
    world = make_world()

    result = await world.prompt(world.session(), "/frobnicate the widget")

    assert result.handled_locally and result.unknown_command
    assert result.text == "Unknown command /frobnicate. /help lists the commands."
    assert notices(world, "command") == [result.text]
    assert world.provider.requests == []


@pytest.mark.parametrize("prompt", ["/usr/bin/env is broken", "/ what is this", "/x.y"])
async def test_a_prompt_starting_with_a_path_goes_to_the_model(
    make_world: MakeWorld, prompt: str
) -> None:
    world = make_world()

    result = await world.prompt(world.session(), prompt)

    assert not result.handled_locally
    assert last_user_text(world.last_main()) == prompt


async def test_commands_added_to_a_session_run_are_listed_and_announced(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()
    heard: list[object] = []

    async def listener(event: object) -> None:
        heard.append(event)

    session.listen(listener)  # type: ignore[arg-type]

    async def hello(session: object, args: str, sink: object) -> CommandOutcome:
        return CommandOutcome(f"hello {args}")

    commands = [SlashCommand("hello", "Say hello", hello, "name"), SlashCommand("help", "x", hello)]
    await session.set_commands("test", commands)
    result = await world.prompt(session, "/hello there")

    assert result.text == "hello there"
    assert [c.name for c in session.commands()][-1] == "hello"
    assert [c.name for c in session.commands()].count("help") == 1  # a taken name is skipped
    [changed] = heard
    assert isinstance(changed, CommandsChanged)
    assert CommandInfo("hello", "Say hello", "name") in changed.commands
    help_text = (await world.prompt(session, "/help")).text
    assert "/hello <name> — Say hello" in help_text


async def test_a_command_line_is_never_steering_text(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()

    assert session.steering_refusal("/recap") == (
        "Cannot run /recap while another operation is in progress."
    )
    assert session.steering_refusal("/compress") == (
        "Cannot run /compress while a turn is running; wait for it or cancel it."
    )
    assert session.steering_refusal("/nope") == "Unknown command /nope. /help lists the commands."
    assert session.steering_refusal("also the README") is None
    assert session.steer("/compress") is False


async def test_a_failing_command_reports_the_failure_instead_of_raising(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()

    async def broken(session: object, args: str, sink: object) -> CommandOutcome:
        raise ValueError("the index is locked")

    await session.set_commands("test", [SlashCommand("broken", "Always fails", broken)])
    result = await world.prompt(session, "/broken now")

    assert result.handled_locally
    assert result.stop_reason == "end_turn"
    assert notices(world, "command:broken") == ["/broken failed: the index is locked"]


async def test_a_command_never_enters_the_history(make_world: MakeWorld) -> None:
    world = make_world()
    session = world.session()
    before = list(session.history)

    await world.prompt(session, "/approval-mode yolo")
    await world.prompt(session, "/model")

    assert session.history == before


# ----- /forget -----


async def test_forget_waits_for_a_memory_write_in_progress_without_stalling_the_event_loop(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (#15): /forget took the memory lock with a blocking wait on the event loop, so
    while a memory agent held it across an await (its write, a database transaction) the loop
    stalled until the lock timed out and /forget failed as "kept the memory locked"."""
    import asyncio

    from cairn.abort import AbortController
    from cairn.memory.background.agent_tools import (
        WRITE_PAUSE_ENV,
        memory_agent_context,
        memory_agent_registry,
    )

    world = make_world(memory=True)
    write_memory(world.project, "deploy", "how we deploy", f"make release {DEPLOY_MARKER}")
    root = world.runtime.memory_manager().roots.project
    assert root is not None
    monkeypatch.setenv(WRITE_PAUSE_ENV, "0.5")
    registry, files = memory_agent_registry()
    ctx = memory_agent_context(
        workspace=root, writable=[root], readable=(), files=files, abort=AbortController().signal
    )
    new = root / "feedback" / "tabs.md"
    memory = "---\nname: Tabs\ndescription: tabs\ntype: feedback\n---\n\nUse tabs.\n"
    writing = asyncio.create_task(
        registry.get("write_file").execute({"file_path": str(new), "content": memory}, ctx)
    )
    while not list(new.parent.glob(".tabs.md.*.tmp")):  # the agent holds the lock, mid-write
        await asyncio.sleep(0.01)

    await world.prompt(world.session(), "/forget how we deploy")

    [said] = notices(world, "command:forget")
    assert said.startswith("Forgot 1 memory entry from: project:project/deploy.md."), said
    assert (await writing).ok
    assert new.read_text() == memory
