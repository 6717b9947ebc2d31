"""The task survives long sessions: a 60-turn session with corrections and several compressions,
against the scripted model over HTTP (the real OpenAI-compatible provider).

What is observed: every request the scripted server received, and the session's plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.session.session import PromptRequest, Session
from cairn.session.startup import load_startup
from cairn.testing import Reply, ScriptedServer, ToolCallSpec, reply
from cairn.testing.request import RecordedRequest, message_text
from cairn.vocabulary.events import Notice, SessionEvent

from ..polling import eventually_async
from .conftest import CAIRN, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TURNS = 60
CORRECTION_TURNS = (5, 10, 14, 19, 23, 28, 33, 38, 44, 50)
STEP_DONE_TURNS = (9, 18, 27, 36, 45, 54)  # the turn that finishes each of the six steps
STEPS = [f"Step {n}: write report section {n}" for n in range(1, 7)]
FILLER = "The numbers for this part are in the spreadsheet; keep the layout. " * 6


def correction(turn: int) -> str:
    number = CORRECTION_TURNS.index(turn) + 1
    return f"Correction {number}: never name a file report_v{number}.md; use final_{number}.md."


def prompt(turn: int) -> str:
    if turn in CORRECTION_TURNS:
        return correction(turn)
    return f"Turn {turn}: go on with the report. {FILLER}"


def plan_after(turn: int) -> list[dict[str, str]]:
    """The todo list the scripted model writes at ``turn``."""
    finished = sum(1 for done in STEP_DONE_TURNS if done <= turn)
    items = []
    for index, step in enumerate(STEPS):
        status = "completed" if index < finished else "pending"
        if index == finished:
            status = "in_progress"
        items.append({"id": str(index + 1), "content": step, "status": status})
    return items


class ScriptedWriter:
    """The scripted model: answers the conversation, writes the plan, keeps the checkpoint."""

    def __init__(self) -> None:
        self.plan: dict[str, str] = {}  # the plan as the model last wrote it
        self.plans: list[dict[str, str]] = []  # the plan when each main request came in

    def __call__(self, request: RecordedRequest) -> Reply | None:
        if request.purpose == "task-checkpoint":
            return self._checkpoint(request)
        if request.purpose != "main":
            return None
        self.plans.append(dict(self.plan))
        last = request.messages[-1]
        if last.get("role") == "tool":
            return reply("Noted; the plan is up to date. " + FILLER)
        turn = _turn_of(message_text(last))
        if turn is None:  # a reminder of the open todo items: the turn ends here
            return reply("The remaining steps come in the next turns.")
        if turn in (1, *STEP_DONE_TURNS):
            todos = plan_after(turn)
            self.plan = {t["content"]: t["status"] for t in todos}
            return Reply(tool_calls=[ToolCallSpec("todo_write", {"todos": todos})])
        return reply(f"Working on turn {turn}. " + FILLER)

    def _checkpoint(self, request: RecordedRequest) -> Reply:
        question = message_text(request.messages[-1])
        said = question.split("User's words since then (number. text):\n", 1)[1]
        said = said.split("\n\nThe todo list now:", 1)[0]
        ids = [
            int(match.group(1))
            for match in re.finditer(r"^(\d+)\. Correction", said, re.MULTILINE)
        ]
        answer = {
            "objective": "Write the six sections of the report.",
            "instructions": [{"id": number} for number in ids],
            "done": [],
            "remaining": ["the remaining sections"],
            "next_step": "Write the next section.",
            "open_questions": [],
            "knowledge": [],
            "recap": "Writing the report. Next: the next section.",
        }
        return reply(json.dumps(answer))


def _turn_of(text: str) -> int | None:
    match = re.search(r"Turn (\d+):", text)
    if match:
        return int(match.group(1))
    found = re.search(r"Correction (\d+):", text)
    return CORRECTION_TURNS[int(found.group(1)) - 1] if found else None


@pytest.fixture
def writer(scripted_server: ScriptedServer) -> Iterator[ScriptedWriter]:
    scripted = ScriptedWriter()
    scripted_server.handler = scripted
    yield scripted


def _request_text(request: RecordedRequest) -> str:
    return "\n".join(message_text(m) for m in request.messages)


def _newest_plan(request: RecordedRequest) -> dict[str, str]:
    """The plan the model reads last in ``request``: from the newest todo_write call or the
    newest checkpoint, whichever comes later."""
    plan: dict[str, str] = {}
    for message in request.messages:
        text = message_text(message)
        if "<task_checkpoint" in text:
            block = text[text.rfind("<task_checkpoint") :]
            plan = dict(
                (m.group(2), m.group(1))
                for m in re.finditer(r"^- \[(\w+)\] (Step \d+: .*)$", block, re.MULTILINE)
            )
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            if function.get("name") == "todo_write":
                todos = json.loads(function.get("arguments") or "{}").get("todos", [])
                plan = {t["content"]: t["status"] for t in todos}
    return plan


async def test_a_60_turn_session_keeps_every_correction_and_the_plan_through_compressions(
    scripted_server: ScriptedServer,
    writer: ScriptedWriter,
    cairn_env: dict[str, str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in cairn_env.items():
        monkeypatch.setenv(name, value)
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "model": {"generationConfig": {"contextWindowSize": 16_000}},
        },
    )
    runtime = load_startup(project, configure_telemetry=False).open_runtime()
    session = runtime.new_session(approval_mode="yolo")
    notices: list[str] = []
    compressed_before: list[int] = []  # the index of the first main request after each

    async def sink(event: SessionEvent) -> None:
        if isinstance(event, Notice) and event.source == "compression":
            notices.append(event.text)
            compressed_before.append(len(_main(scripted_server)))

    said_at: dict[int, int] = {}  # turn -> index of its first main request
    try:
        for turn in range(1, TURNS + 1):
            said_at[turn] = len(_main(scripted_server))
            result = await session.prompt(PromptRequest(prompt(turn)), sink)
            assert result.stop_reason == "end_turn", (turn, result.error)
    finally:
        await _close(session, runtime)

    main = _main(scripted_server)
    compressed = [n for n in notices if n.startswith("Compressed the conversation")]
    assert len(compressed) >= 3, notices
    assert all("(from the task checkpoint)" in n for n in compressed)
    assert scripted_server.requests_for("compress") == []  # no model-written summary needed
    # Every correction is in every model request after it was said, word for word.
    for turn in CORRECTION_TURNS:
        for index in range(said_at[turn], len(main)):
            assert correction(turn) in _request_text(main[index]), (turn, index)
    # The plan the model reads is the plan it wrote, before and after every compression: no
    # finished step comes back as still to do.
    assert len(writer.plans) == len(main)
    for index in range(compressed_before[0], len(main)):
        assert _newest_plan(main[index]) == writer.plans[index], index
    assert [t.content for t in session.todos if t.status == "completed"] == STEPS[:6]
    # Upkeep: at most one checkpoint question per turn that reached the model.
    assert len(scripted_server.requests_for("task-checkpoint")) <= TURNS


def _main(server: ScriptedServer) -> list[RecordedRequest]:
    return server.requests_for("main")


async def _close(session: Session, runtime: Any) -> None:
    await session.close()
    await runtime.aclose()


# ----- a crash in the middle of a tool call -----

NEXT_STEP = "Run the slow integration tests again with -x."


def crash_model(project: Path) -> Any:
    """Answers a first turn, keeps the checkpoint, and makes the second turn run a long shell
    command that writes its pid and a marker first."""
    command = f"echo $$ > {project / 'shell.pid'}; touch {project / 'started'}; sleep 120"

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "task-checkpoint":
            answer = {
                "objective": "Make the integration tests pass.",
                "instructions": [{"id": 1}],
                "done": [{"step": "Fixed the fixture", "evidence": "edited tests/conftest.py"}],
                "remaining": ["run the slow tests"],
                "next_step": NEXT_STEP,
                "recap": "Making the integration tests pass. Next: run the slow tests.",
            }
            return reply(json.dumps(answer))
        if request.purpose != "main":
            return None
        last = message_text(request.messages[-1])
        if "run the slow tests" in last:
            return Reply(tool_calls=[ToolCallSpec("run_shell_command", {"command": command})])
        return reply("Going on.")

    return handle


async def test_after_a_kill_during_a_tool_call_continue_carries_the_checkpoint(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    from acp.schema import TextContentBlock

    from .test_acp_process import running_agent

    scripted_server.handler = crash_model(project)
    env = {**cairn_env, "CAIRN_MEMORY_LOCAL": "1"}
    chats = Path(env["CAIRN_HOME"]) / "projects"
    async with running_agent(env, project) as agent:
        session_id = await agent.start_session()
        prompt = [TextContentBlock(type="text", text="Never skip the slow tests; fix the fixture.")]
        await agent.conn.prompt(session_id=session_id, prompt=prompt)
        assert await eventually_async(lambda: _recorded(chats, "task_checkpoint"))  # quiet: kept
        slow = [TextContentBlock(type="text", text="Now run the slow tests.")]
        running = asyncio.ensure_future(agent.conn.prompt(session_id=session_id, prompt=slow))
        assert await eventually_async(lambda: (project / "started").exists())
        agent.process.kill()  # kill -9 while the shell command runs
        await agent.process.wait()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    _kill_shell(project / "shell.pid")

    resumed = subprocess.run(
        [*CAIRN, "-p", "--continue", "continue"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert resumed.returncode == 0, resumed.stderr
    assert "The last turn did not finish: cairn stopped while running run_shell_command" in (
        resumed.stderr
    )
    assert "Next: run the slow tests." in resumed.stderr
    request = _request_text(scripted_server.requests_for("main")[-1])
    assert "The previous cairn process stopped before the last turn finished" in request
    assert f"Next step: {NEXT_STEP}" in request
    assert "[turn 1] Never skip the slow tests; fix the fixture." in request
    assert "The tool call was interrupted" in request  # the cut call is answered, not dangling


def _recorded(root: Path, subtype: str) -> bool:
    return any(f'"subtype":"{subtype}"' in path.read_text() for path in root.rglob("*.jsonl"))


def _kill_shell(pid_file: Path) -> None:
    """The shell command outlived its killed parent: end it (it only sleeps)."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
