"""End to end: the real ``cairn --acp`` process, driven by the ACP SDK's own client.

Each test starts ``cairn --acp`` with an isolated ``CAIRN_HOME`` and ``CAIRN_MEMORY_LOCAL=1``
against the scripted model server, and checks what crosses a process boundary: the messages on
the agent's stdout, the requests the model server received, files on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
)
from acp.stdio import spawn_agent_process

from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call

from ..acp.acp_doubles import editor_read
from .conftest import ACP_SHUTDOWN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

CAIRN = str(Path(sys.executable).parent / "cairn")
DEPLOY_MARKER = "MARKER-E2E-DEPLOY-3141"  # a memory the prompt matches lexically
STYLE_MARKER = "MARKER-E2E-STYLE-2718"  # a memory only the selector picks
DEPLOY_PROMPT = "how do we deploy the billing service?"
COMPLETED_PROMPT = "thanks, that is all for today"
_MANIFEST_PATH = re.compile(r"^- \[\w+\] (\S+\.md) \(", re.MULTILINE)


@dataclass
class EditorClient:
    """What an editor does: shows updates, answers permission requests, serves buffers."""

    permission: str = "allow_once"
    buffers: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # path -> why the editor refuses it
    updates: list[Any] = field(default_factory=list)
    permission_requests: list[Any] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    wire: list[dict[str, Any]] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **_kw: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_kw: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.permission)
        )

    async def read_text_file(self, session_id: str, path: str, **_kw: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        return editor_read(path, self.buffers, self.refused)

    def observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.wire.append(event.message)


@dataclass
class Agent:
    conn: ClientSideConnection
    client: EditorClient
    process: asyncio.subprocess.Process
    project: Path

    async def start_session(self, **capabilities: Any) -> str:
        await self.conn.initialize(
            protocol_version=1, client_capabilities=ClientCapabilities.model_validate(capabilities)
        )
        session = await self.conn.new_session(cwd=str(self.project))
        return session.session_id

    async def prompt(self, session_id: str, text: str) -> Any:
        return await self.conn.prompt(
            session_id=session_id, prompt=[TextContentBlock(type="text", text=text)]
        )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    memory = folder / ".cairn" / "memory" / "project"
    memory.mkdir(parents=True)
    (memory / "deploy.md").write_text(
        "---\nname: billing deploy checklist\ndescription: how we deploy the billing service\n"
        f"type: project\n---\n\n{DEPLOY_MARKER}: deploy billing with `make release`.\n"
    )
    (memory / "style.md").write_text(
        "---\nname: house code style\ndescription: formatting preferences\ntype: project\n---\n\n"
        f"{STYLE_MARKER}: tabs, never spaces.\n"
    )
    # The selector tests time it against the main model's replies; semantic candidates would
    # start it only once the first request left and their model loaded (docs/memory.md).
    (folder / ".cairn" / "settings.json").write_text('{"memory": {"semanticCandidates": false}}')
    return folder


@pytest.fixture
def agent_env(cairn_env: dict[str, str]) -> dict[str, str]:
    return {**cairn_env, "CAIRN_MEMORY_LOCAL": "1"}


@contextlib.asynccontextmanager
async def running_agent(
    env: dict[str, str], project: Path, *args: str, client: EditorClient | None = None
) -> AsyncIterator[Agent]:
    client = client or EditorClient()
    stderr = open(project.parent / "agent-stderr.txt", "wb")  # noqa: SIM115 - closed below
    try:
        async with spawn_agent_process(
            client,
            CAIRN,
            "--acp",
            *args,
            env=env,
            cwd=project,
            transport_kwargs={"stderr": stderr.fileno(), **ACP_SHUTDOWN},
            observers=[client.observe],
        ) as (conn, process):
            yield Agent(conn, client, process, project)
    finally:
        stderr.close()


def selector(choose: str | None = None, *, delay: float = 0.0) -> Any:
    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose != "recall-selector":
            return None
        paths = _MANIFEST_PATH.findall(request.last_user_text())
        chosen = [p for p in paths if choose and p.endswith(f"/{choose}")]
        return Reply(text=json.dumps({"selected_memories": chosen}), delay=delay)

    return handle


def occurrences(request: RecordedRequest, text: str) -> int:
    return json.dumps(request.messages).count(text)


# ----- memory over ACP -----


async def test_a_matching_memory_is_in_the_first_model_request_while_the_selector_is_slow(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    scripted_server.handler = selector("deploy.md", delay=1.0)
    # Answered after a moment, so the selector's request leaves before the turn ends.
    scripted_server.enqueue(reply("Use make release.", delay=0.3), purpose="main")
    async with running_agent(agent_env, project) as agent:
        session_id = await agent.start_session()
        response = await agent.prompt(session_id, DEPLOY_PROMPT)

    assert response.stop_reason == "end_turn"
    [select] = scripted_server.requests_for("recall-selector")
    first = scripted_server.requests_for("main")[0]
    assert first.contains(DEPLOY_MARKER)
    assert first.received_at < select.received_at + 1.0  # sent before the selector answered


async def test_refined_memory_follows_the_function_responses_and_is_never_sent_twice(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    (project / "Makefile").write_text("release:\n\techo ok\n")
    scripted_server.handler = selector("style.md", delay=0.1)
    first_call = tool_call("read_file", {"file_path": "Makefile"})
    scripted_server.enqueue(
        Reply(tool_calls=first_call.tool_calls, delay=0.8),  # the selector settles meanwhile
        tool_call("list_directory", {"path": "."}),
        reply("Done."),
        purpose="main",
    )
    async with running_agent(agent_env, project) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, DEPLOY_PROMPT)

    first, second, third = scripted_server.requests_for("main")
    assert not first.contains(STYLE_MARKER)
    roles = [m["role"] for m in second.messages]
    memory_at = next(i for i, m in enumerate(second.messages) if STYLE_MARKER in json.dumps(m))
    assert memory_at > max(i for i, role in enumerate(roles) if role == "tool")
    assert occurrences(second, STYLE_MARKER) == 1
    assert occurrences(third, STYLE_MARKER) == 1


async def test_a_completed_turn_is_followed_by_extraction(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    scripted_server.handler = selector()
    scripted_server.default = reply("Nothing to save.")
    async with running_agent(agent_env, project) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, "remember that we deploy on Fridays")
        requests = await scripted_server.async_wait_for_requests(1, purpose="extract", timeout=30)

    assert requests


async def test_a_cancelled_turn_is_not_followed_by_extraction(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    scripted_server.handler = selector()
    scripted_server.enqueue(reply("too slow", delay=30), purpose="main")
    scripted_server.default = reply("Nothing to save.")
    async with running_agent(agent_env, project) as agent:
        session_id = await agent.start_session()
        running = asyncio.ensure_future(agent.prompt(session_id, DEPLOY_PROMPT))
        await scripted_server.async_wait_for_requests(1, purpose="main")
        await agent.conn.cancel(session_id=session_id)
        assert (await running).stop_reason == "cancelled"
        # Extractions run one at a time, in order: one the cancelled turn had started would
        # ask the model before the one of the turn that completes now.
        await agent.prompt(session_id, COMPLETED_PROMPT)
        await scripted_server.async_wait_for_requests(1, purpose="extract", timeout=30)

    [extraction] = scripted_server.requests_for("extract")
    assert extraction.contains(COMPLETED_PROMPT)


# ----- the protocol -----


async def test_a_malformed_line_gets_a_parse_error_and_the_agent_keeps_serving(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    async with running_agent(agent_env, project) as agent:
        assert agent.process.stdin is not None
        agent.process.stdin.write(b"{this is not json\n")
        await agent.process.stdin.drain()
        session_id = await agent.start_session()

    [error] = [m for m in agent.client.wire if "error" in m and m.get("id") is None]
    assert error["error"]["code"] == -32700
    assert session_id


async def test_a_permission_round_trip_lets_the_edit_happen(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    scripted_server.handler = selector()
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "hello.txt", "content": "hi"}),
        reply("Written."),
        purpose="main",
    )
    async with running_agent(agent_env, project) as agent:
        session_id = await agent.start_session()
        response = await agent.prompt(session_id, "write hello.txt")

    assert response.stop_reason == "end_turn"
    [(asked, options)] = agent.client.permission_requests
    assert asked.kind == "edit"
    assert {o.option_id for o in options} == {"allow_once", "allow_always", "reject_once"}
    assert (project / "hello.txt").read_text() == "hi"


async def test_file_reads_are_served_by_the_editor(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    path = project / "app.py"
    path.write_text("on disk\n")
    scripted_server.handler = selector()
    scripted_server.enqueue(
        tool_call("read_file", {"file_path": "app.py"}), reply("Read."), purpose="main"
    )
    async with running_agent(agent_env, project) as agent:
        agent.client.buffers[str(path)] = "UNSAVED-EDITOR-BUFFER\n"
        session_id = await agent.start_session(fs={"readTextFile": True})
        await agent.prompt(session_id, "read app.py")

    assert agent.client.reads == [str(path)]
    assert scripted_server.requests_for("main")[1].contains("UNSAVED-EDITOR-BUFFER")


async def test_stdout_carries_only_protocol_messages(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    """Even a command that writes to the terminal cannot corrupt the protocol stream."""
    scripted_server.handler = selector()
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "echo STRAY-OUTPUT; echo STRAY-ERR >&2"}),
        reply("Ran it."),
        purpose="main",
    )
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(project), "mcpServers": []},
        },
    ]
    process = await asyncio.create_subprocess_exec(
        CAIRN,
        "--acp",
        "--yolo",
        env=agent_env,
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    out: list[bytes] = []

    async def read_until(request_id: int) -> dict[str, Any]:
        while True:
            line = await asyncio.wait_for(process.stdout.readline(), 30)  # type: ignore[union-attr]
            out.append(line)
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    for message in lines:
        process.stdin.write(json.dumps(message).encode() + b"\n")
        response = await read_until(message["id"])  # type: ignore[arg-type]
    session_id = response["result"]["sessionId"]
    prompt = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/prompt",
        "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "run it"}]},
    }
    process.stdin.write(json.dumps(prompt).encode() + b"\n")
    await read_until(3)
    process.stdin.close()
    out.append(await asyncio.wait_for(process.stdout.read(), 30))
    await asyncio.wait_for(process.wait(), 30)

    stream = b"".join(out)
    for line in stream.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert b"STRAY-OUTPUT" in stream  # inside a tool_call_update, as JSON
    assert b"\nSTRAY-OUTPUT" not in stream


def test_an_unusable_settings_file_exits_52_with_a_message(
    cairn_env: dict[str, str], project: Path
) -> None:
    Path(cairn_env["CAIRN_HOME"], "settings.json").write_text(
        '{"memory": {"enableManagedAutoMemory": "maybe"}}'
    )

    result = subprocess.run(
        [CAIRN, "--acp"], env=cairn_env, cwd=project, input=b"", capture_output=True, timeout=60
    )

    assert result.returncode == 52
    assert b"enableManagedAutoMemory" in result.stderr
    assert b"Traceback" not in result.stderr
    assert result.stdout == b""


def test_closing_stdin_ends_the_agent_cleanly(cairn_env: dict[str, str], project: Path) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1},
    }

    result = subprocess.run(
        [CAIRN, "--acp"],
        env=cairn_env,
        cwd=project,
        input=json.dumps(initialize).encode() + b"\n",
        capture_output=True,
        timeout=60,
    )

    assert result.returncode == 0
    [line] = result.stdout.splitlines()
    assert json.loads(line)["result"]["agentInfo"]["name"] == "cairn"
    assert b"Traceback" not in result.stderr
    assert os.environ.get("CAIRN_HOME") != cairn_env["CAIRN_HOME"]


def test_stdin_closing_while_requests_are_answered_prints_no_runtime_warning(
    agent_env: dict[str, str], project: Path
) -> None:
    """#16: a client that sent initialize and session/new and closed stdin at once got
    "RuntimeWarning: coroutine ... was never awaited" on stderr: the work scheduled for after
    each response was cancelled at shutdown before it began."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(project), "mcpServers": []},
        },
    ]

    result = subprocess.run(
        [CAIRN, "--acp"],
        env=agent_env,
        cwd=project,
        input=b"".join(json.dumps(r).encode() + b"\n" for r in requests),
        capture_output=True,
        timeout=60,
    )

    assert result.returncode == 0
    answered = [json.loads(line) for line in result.stdout.splitlines()]
    assert [m.get("id") for m in answered if "result" in m] == [1, 2]
    assert b"RuntimeWarning" not in result.stderr
    assert b"never awaited" not in result.stderr


def test_an_invalid_approval_mode_is_bad_input(cairn_env: dict[str, str], project: Path) -> None:
    result = subprocess.run(
        [CAIRN, "--acp", "--approval-mode", "reckless"],
        env=cairn_env,
        cwd=project,
        input=b"",
        capture_output=True,
        timeout=60,
    )

    assert result.returncode == 42  # bad input, as everywhere in the CLI
    assert b"reckless" in result.stderr
    assert result.stdout == b""


async def test_bad_notifications_are_logged_in_one_line_without_a_traceback(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    async with running_agent(agent_env, project) as agent:
        assert agent.process.stdin is not None
        agent.process.stdin.write(b'{"jsonrpc": "2.0", "method": "session/teleport"}\n')
        agent.process.stdin.write(b'{"jsonrpc": "2.0", "method": "session/cancel", "params": 5}\n')
        await agent.process.stdin.drain()
        session_id = await agent.start_session()

    stderr = (project.parent / "agent-stderr.txt").read_text()
    assert session_id
    assert "Traceback" not in stderr


async def test_sigterm_ends_the_agent_cleanly(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    async with running_agent(agent_env, project) as agent:
        await agent.start_session()
        agent.process.terminate()
        code = await asyncio.wait_for(agent.process.wait(), 30)

    assert code == 0
    assert "Traceback" not in (project.parent / "agent-stderr.txt").read_text()


async def test_a_warning_logged_before_the_session_exists_reaches_stderr_and_its_log(
    scripted_server: ScriptedServer, agent_env: dict[str, str], project: Path
) -> None:
    """#17: cairn's warnings reached only the debug log, and those logged before a session
    existed (here: loading a recording a crash left torn) reached nothing at all."""
    scripted_server.enqueue(reply("Noted."), purpose="main")
    async with running_agent(agent_env, project) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, "remember the word pelican")
    [recording] = Path(agent_env["CAIRN_HOME"]).glob(f"projects/*/chats/{session_id}.jsonl")
    with recording.open("a") as handle:
        handle.write('{"uuid": "torn", "parentUuid": ')  # a crash mid-write

    async with running_agent(agent_env, project) as agent:
        await agent.conn.initialize(protocol_version=1)
        await agent.conn.load_session(cwd=str(project), session_id=session_id)

    stderr = (project.parent / "agent-stderr.txt").read_text()
    shown = [line for line in stderr.splitlines() if "unfinished last record" in line]
    assert shown and all(line.startswith("cairn --acp: warning: [") for line in shown)
    log = Path(agent_env["CAIRN_HOME"], "debug", f"{session_id}.txt").read_text()
    assert "unfinished last record (interrupted write) skipped" in log


def test_a_stdin_that_is_not_a_pipe_ends_the_agent_cleanly(
    cairn_env: dict[str, str], project: Path
) -> None:
    """Regression: `cairn --acp < /dev/null` hung for ever after an epoll error on stdin."""
    done = subprocess.run(
        [CAIRN, "--acp"],
        cwd=project,
        env=cairn_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )

    assert done.returncode == 0
    assert done.stdout == b""
    assert b"Traceback" not in done.stderr and b"PermissionError" not in done.stderr
