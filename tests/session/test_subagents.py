"""The agent tool in a real session: subagents on the same runtime, their tools, approvals,
concurrency, cancellation and what front ends are told."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from cairn.content import FunctionResponse, Text
from cairn.llm.types import ModelRequest
from cairn.session.updates import UpdateMapper
from cairn.testing import Reply, ScriptedFrontend, ToolCallSpec, reply, tool_call, tool_calls
from cairn.vocabulary.events import SubagentUpdate, ToolCallStart, ToolCallUpdate

from .helpers import MakeWorld


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


def agent_call(prompt: str, kind: str = "general-purpose", id: str | None = None) -> ToolCallSpec:
    return ToolCallSpec(
        "agent", {"description": "look around", "prompt": prompt, "subagent_type": kind}, id
    )


def task_of(request: ModelRequest) -> str:
    return "".join(p.text for p in request.contents[-1].parts if isinstance(p, Text))


def result_of(request: ModelRequest, call_id: str) -> FunctionResponse:
    return next(
        p
        for c in request.contents
        for p in c.parts
        if isinstance(p, FunctionResponse) and p.id == call_id
    )


async def test_an_agent_call_runs_a_subagent_whose_answer_is_the_tool_result(
    make_world: MakeWorld, project: Path
) -> None:
    (project / "notes.txt").write_text("the answer is 42\n")
    world = make_world()
    world.provider.enqueue(
        tool_calls(agent_call("Find the answer in notes.txt", id="a1")),
        reply("It is 42."),
        purpose="main",
    )
    world.provider.enqueue(
        tool_call("read_file", {"file_path": "notes.txt"}),
        reply("notes.txt says 42."),
        purpose="subagent",
    )
    session = world.session()

    result = await world.prompt(session, "what is the answer?")

    assert result.text == "It is 42."
    first, second = world.main_requests()
    sub_first, sub_second = world.provider.requests_for("subagent")
    assert task_of(sub_first) == "Find the answer in notes.txt"
    assert sub_first.system.startswith("You are a subagent of cairn")
    offered = {t.name for t in sub_first.tools}
    assert "read_file" in offered and "run_shell_command" in offered
    assert "agent" not in offered and "ask_user_question" not in offered
    assert "agent" in {t.name for t in first.tools}
    assert result_of(second, "a1").response == {"output": "notes.txt says 42."}
    read = [p for c in sub_second.contents for p in c.parts if isinstance(p, FunctionResponse)]
    assert len(read) == 1 and "the answer is 42" in str(read[0].response)


async def test_subagent_work_is_reported_under_the_parent_call(
    make_world: MakeWorld, project: Path
) -> None:
    (project / "a.txt").write_text("A\n")
    world = make_world()
    world.provider.enqueue(
        tool_calls(agent_call("read a.txt", id="p1")), reply("ok"), purpose="main"
    )
    world.provider.enqueue(
        tool_call("read_file", {"file_path": "a.txt"}, id="s1"), reply("A."), purpose="subagent"
    )
    session = world.session()

    await world.prompt(session, "go")

    nested = [e for e in world.events if isinstance(e, SubagentUpdate)]
    assert nested and {e.parent_call_id for e in nested} == {"p1"}
    assert {e.agent_type for e in nested} == {"general-purpose"}
    inner = [e.event for e in nested]
    assert any(isinstance(e, ToolCallStart) and e.call_id == "s1" for e in inner)
    assert any(
        isinstance(e, ToolCallUpdate) and e.call_id == "s1" and e.status == "completed"
        for e in inner
    )
    # The one mapper shows them as updates of the agent call, for ACP and the daemon alike.
    mapper = UpdateMapper(session.registry)
    payloads = [p for e in world.events for p in mapper.event(e)]
    for_parent = [p for p in payloads if p.get("toolCallId") == "p1"]
    subagent_meta = [p["_meta"]["cairn"] for p in for_parent if "_meta" in p]
    assert subagent_meta and all(
        m["kind"] == "subagent" and m["parentToolCallId"] == "p1" for m in subagent_meta
    )
    last = for_parent[-1]
    assert last["status"] == "completed"
    steps = last["content"][0]["content"]["text"]
    assert steps.startswith("general-purpose subagent: 1 tool call") and "✓ Read" in steps
    assert last["content"][1]["content"]["text"] == "A."


async def test_an_agent_definition_narrows_tools_and_sets_its_prompt_model_and_limit(
    make_world: MakeWorld, project: Path
) -> None:
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads files only\ntools: Read, Grep\n"
        "model: reader-model\nmaxTurns: 2\n---\nYou only read."
    )
    world = make_world()
    world.provider.enqueue(
        tool_calls(agent_call("read", "reader", id="r")), reply("done"), purpose="main"
    )
    world.provider.enqueue(
        tool_call("read_file", {"file_path": "x"}),
        tool_call("read_file", {"file_path": "y"}),
        purpose="subagent",
    )
    session = world.session()

    await world.prompt(session, "go")

    subs = world.provider.requests_for("subagent")
    assert len(subs) == 2  # its maxTurns
    assert {t.name for t in subs[0].tools} == {"read_file", "grep_search"}
    assert subs[0].system.startswith("You only read.")
    assert subs[0].model == "reader-model"
    answer = result_of(world.last_main(), "r").response["output"]
    assert "stopped at its limit of 2 model requests" in answer


async def test_a_subagents_edit_is_approved_by_the_same_person_with_the_agent_named(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world()
    world.provider.enqueue(tool_calls(agent_call("write it", id="w")), reply("ok"), purpose="main")
    world.provider.enqueue(
        tool_call("write_file", {"file_path": "out.txt", "content": "hi\n"}),
        reply("wrote"),
        purpose="subagent",
    )
    user = ScriptedFrontend(permissions=["allow_once"])
    session = world.session(frontend=user)

    await world.prompt(session, "go")

    (asked,) = user.permission_requests
    assert asked.tool_name == "write_file"
    assert asked.title.startswith("general-purpose: ")
    assert (project / "out.txt").read_text() == "hi\n"


async def test_a_subagent_follows_the_parents_approval_mode(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world()
    world.provider.enqueue(tool_calls(agent_call("write it", id="w")), reply("ok"), purpose="main")
    world.provider.enqueue(
        tool_call("write_file", {"file_path": "out.txt", "content": "hi\n"}),
        reply("could not"),
        purpose="subagent",
    )
    session = world.session(approval_mode="plan")

    await world.prompt(session, "go")

    assert not (project / "out.txt").exists()
    sub_second = world.provider.requests_for("subagent")[1]
    refused = next(p for p in sub_second.contents[-1].parts if isinstance(p, FunctionResponse))
    assert "Plan mode" in refused.response["error"]


async def test_two_agent_calls_in_one_response_run_at_the_same_time(make_world: MakeWorld) -> None:
    both_asked = asyncio.Event()
    first_requests: list[ModelRequest] = []

    async def subagent_answers(request: ModelRequest) -> Reply | None:
        if request.purpose != "subagent":
            return None
        first_requests.append(request)
        if len(first_requests) == 2:
            both_asked.set()
        await asyncio.wait_for(both_asked.wait(), timeout=20)  # only if both run at once
        return reply(f"answer to {task_of(request)}")

    world = make_world()
    world.provider.handler = subagent_answers
    world.provider.enqueue(
        tool_calls(agent_call("task one", id="one"), agent_call("task two", id="two")),
        reply("both done"),
        purpose="main",
    )
    session = world.session()

    result = await world.prompt(session, "do both")

    assert result.text == "both done"
    last = world.last_main()
    assert result_of(last, "one").response == {"output": "answer to task one"}
    assert result_of(last, "two").response == {"output": "answer to task two"}


async def test_concurrent_subagents_are_bounded_by_the_setting(make_world: MakeWorld) -> None:
    running = 0
    most = 0

    async def subagent_answers(request: ModelRequest) -> Reply | None:
        nonlocal running, most
        if request.purpose != "subagent":
            return None
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        running -= 1
        return reply("ok")

    world = make_world(agents={"maxConcurrent": 1})
    world.provider.handler = subagent_answers
    world.provider.enqueue(
        tool_calls(*(agent_call(f"task {i}", id=f"t{i}") for i in range(3))),
        reply("done"),
        purpose="main",
    )
    session = world.session()

    await world.prompt(session, "go")

    assert most == 1
    assert len(world.provider.requests_for("subagent")) == 3


async def test_cancelling_the_turn_cancels_every_running_subagent(
    make_world: MakeWorld, project: Path
) -> None:
    started = asyncio.Event()
    waiting: list[str] = []

    async def hang(request: ModelRequest) -> Reply | None:
        if request.purpose != "subagent":
            return None
        waiting.append(task_of(request))
        if len(waiting) == 2:
            started.set()
        await asyncio.Event().wait()  # never answers: only a cancel ends it
        return None

    world = make_world()
    world.provider.handler = hang
    world.provider.enqueue(
        tool_calls(agent_call("one", id="one"), agent_call("two", id="two")), purpose="main"
    )
    session = world.session()

    turn = asyncio.ensure_future(world.prompt(session, "go"))
    await asyncio.wait_for(started.wait(), timeout=20)
    assert session.cancel()
    result = await asyncio.wait_for(turn, timeout=20)

    assert result.stop_reason == "cancelled"
    assert sorted(waiting) == ["one", "two"]
    assert not session.busy


async def test_a_subagent_never_recalls_and_its_turns_schedule_no_extract(
    make_world: MakeWorld, project: Path
) -> None:
    memory = project / ".cairn" / "memory" / "project"
    memory.mkdir(parents=True)
    (memory / "x.md").write_text(
        "---\nname: deploy\ndescription: deploy notes\ntype: project\n---\nDEPLOY-MARK\n"
    )
    world = make_world(memory=True)
    world.provider.default = reply("{}")
    world.provider.enqueue(
        tool_calls(agent_call("deploy notes please", id="d")), reply("ok"), purpose="main"
    )
    world.provider.enqueue(reply("subagent answer about deploy"), purpose="subagent")
    session = world.session()

    await world.prompt(session, "deploy notes please")
    await world.settle()

    (sub,) = world.provider.requests_for("subagent")
    assert "DEPLOY-MARK" not in str(sub.contents)
    assert "DEPLOY-MARK" not in (sub.system or "")
    extracts = world.provider.requests_for("extract")
    assert len(extracts) == 1  # the parent's turn only
    assert "subagent answer about deploy" in str(extracts[0].contents)


async def test_an_unknown_subagent_type_is_an_error_the_model_can_read(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.provider.enqueue(
        tool_calls(agent_call("x", "nobody", id="n")), reply("ok"), purpose="main"
    )
    session = world.session()

    await world.prompt(session, "go")

    error = result_of(world.last_main(), "n").response["error"]
    assert 'no subagent type "nobody"' in error and "general-purpose" in error
    assert world.provider.requests_for("subagent") == []


async def test_agents_can_be_turned_off(make_world: MakeWorld) -> None:
    world = make_world(agents={"enabled": False})
    session = world.session()

    await world.prompt(session, "hi")

    assert "agent" not in {t.name for t in world.last_main().tools}


async def test_the_agent_tool_lists_agent_definitions(make_world: MakeWorld, project: Path) -> None:
    agents = project / ".cairn" / "agents"
    agents.mkdir(parents=True)
    (agents / "r.md").write_text(
        "---\nname: reviewer\ndescription: Reviews diffs for bugs\n---\nReview."
    )
    world = make_world()
    session = world.session()

    await world.prompt(session, "hi")

    (agent,) = [t for t in world.last_main().tools if t.name == "agent"]
    assert "- reviewer: Reviews diffs for bugs" in agent.description
    assert "- general-purpose:" in agent.description
    assert agent.parameters["properties"]["subagent_type"]["enum"] == [
        "reviewer",
        "general-purpose",
    ]
    listing = await world.prompt(session, "/agents")
    assert "- reviewer — Reviews diffs for bugs (.cairn/agents/r.md; all tools)" in listing.text


async def test_a_hook_that_stops_a_subagents_call_ends_the_subagent_not_the_turn(
    make_world: MakeWorld, tmp_path: Path
) -> None:
    """Regression: the subagent had a tool loop of its own that ignored a PostToolUse
    `continue: false` and sent the call's result back to its model; on the one tool loop a
    hook's stop ends the subagent as it ends a turn, and the parent hears why."""
    script = tmp_path / "stop.py"
    script.write_text(
        'import json\nprint(json.dumps({"continue": False, "stopReason": "the build is broken"}))\n'
    )
    command = {"type": "command", "command": f"{sys.executable} {script}"}
    hooks = {"PostToolUse": [{"matcher": "list_directory", "hooks": [command]}]}
    world = make_world(hooks=hooks)
    world.provider.enqueue(
        tool_calls(agent_call("List the files", id="a1")), reply("Done."), purpose="main"
    )
    world.provider.enqueue(
        tool_call("list_directory", {"path": "."}), reply("never sent"), purpose="subagent"
    )
    session = world.session()

    result = await world.prompt(session, "what is here?")

    assert result.text == "Done."
    assert len(world.provider.requests_for("subagent")) == 1  # its result went to no model
    answer = result_of(world.main_requests()[1], "a1").response["output"]
    assert answer.startswith("(A hook stopped the subagent: the build is broken.)")
