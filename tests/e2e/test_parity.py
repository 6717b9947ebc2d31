"""An editor (``cairn --acp``) and a daemon client (``cairn serve``) see the same session.

One scripted session (text, a tool call that needs approval, a todo plan, a recap, then a
reload) is driven through a real ``cairn --acp`` process and a real ``cairn serve`` process,
against the same scripted model answers, in the same project. The ``session/update`` payloads
each front end sends, live and replayed, must be identical, and so must the tool call each asks
approval for; only ids that are random by design (``sessionId``, ``messageId``) are renamed, in
the order they first appear.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import selectors
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    RequestPermissionResponse,
    TextContentBlock,
)
from acp.stdio import spawn_agent_process

from cairn.testing import ScriptedServer, reply, tool_call

from .conftest import ACP_SHUTDOWN, CAIRN, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ACP_CAIRN = str(Path(sys.executable).parent / "cairn")
RECAP = "Writing the greeting file. Next: check its wording."
TODOS = [
    {"id": "1", "content": "Write greeting.txt", "status": "completed"},
    {"id": "2", "content": "Check the wording", "status": "completed"},
]


def script_turns(server: ScriptedServer) -> None:
    """Two prompts: the first answered in text, the second with the tool calls."""
    server.enqueue(reply(chunks=["I'll write ", "the file."]), purpose="main")
    server.enqueue(
        tool_call("write_file", {"file_path": "greeting.txt", "content": "hello\n"}, id="w1"),
        tool_call("todo_write", {"todos": TODOS}, id="t1"),
        reply("Done: greeting.txt says hello."),
        purpose="main",
    )
    server.enqueue(reply(f"<recap>{RECAP}</recap>"), purpose="recap")


TURNS = ("what will you do?", "write a greeting file", "/recap")


@dataclass
class Seen:
    """What one front end showed: live payloads, replayed payloads, approvals asked."""

    live: list[dict[str, Any]] = field(default_factory=list)
    replayed: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def parity_project(project: Path) -> Path:
    write_settings(project, {"memory": {"enableManagedAutoMemory": False}})
    return project


# ----- ACP -----


@dataclass
class Editor:
    """The editor side of ``cairn --acp``: approves every call, keeps the raw messages."""

    wire: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **_kw: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_kw: Any
    ) -> RequestPermissionResponse:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    def observe(self, event: StreamEvent) -> None:
        if event.direction.value != "incoming":
            return
        message = event.message
        if message.get("method") == "session/update":
            self.wire.append(message["params"]["update"])
        elif message.get("method") == "session/request_permission":
            params = message["params"]
            self.approvals.append({"toolCall": params["toolCall"], "options": params["options"]})

    def take(self) -> list[dict[str, Any]]:
        taken, self.wire = self.wire, []
        return taken


@contextlib.asynccontextmanager
async def acp_agent(
    env: dict[str, str], project: Path, editor: Editor
) -> AsyncIterator[ClientSideConnection]:
    stderr = open(project.parent / "acp-stderr.txt", "wb")  # noqa: SIM115 - closed below
    try:
        async with spawn_agent_process(
            editor,
            ACP_CAIRN,
            "--acp",
            env=env,
            cwd=project,
            transport_kwargs={"stderr": stderr.fileno(), **ACP_SHUTDOWN},
            observers=[editor.observe],
        ) as (conn, _process):
            await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
            yield conn
    finally:
        stderr.close()


async def settle(editor: Editor, count: int, timeout: float = 30.0) -> None:
    """Wait until at least ``count`` updates arrived (notifications can trail a response)."""
    async with asyncio.timeout(timeout):
        while len(editor.wire) < count:
            await asyncio.sleep(0.02)


async def commands_announced(editor: Editor, timeout: float = 30.0) -> None:
    """Wait for the ``available_commands_update`` an agent sends after answering a load."""
    async with asyncio.timeout(timeout):
        while not any(u["sessionUpdate"] == "available_commands_update" for u in editor.wire):
            await asyncio.sleep(0.02)


async def through_acp(env: dict[str, str], project: Path, live: int) -> Seen:
    """The session through ``cairn --acp``, waiting for at least ``live`` live updates (some
    trail the last prompt's answer)."""
    seen = Seen()
    editor = Editor()
    async with acp_agent(env, project, editor) as conn:
        session = await conn.new_session(cwd=str(project))
        for text in TURNS:
            await conn.prompt(
                session_id=session.session_id, prompt=[TextContentBlock(type="text", text=text)]
            )
        await settle(editor, live)
        seen.live = editor.take()
        seen.approvals = editor.approvals
    editor = Editor()
    async with acp_agent(env, project, editor) as conn:
        await conn.load_session(cwd=str(project), session_id=session.session_id)
        await settle(editor, 1)
        await commands_announced(editor)  # right after the answer; late on a loaded machine
        seen.replayed = editor.take()
    return seen


# ----- the daemon -----

# With a token, as trusted as the editor: a token-less daemon offers no "allow always".
DAEMON_TOKEN = "parity-token"


@contextlib.contextmanager
def daemon(env: dict[str, str], project: Path) -> Iterator[str]:
    process = subprocess.Popen(
        [*CAIRN, "serve", "--port", "0", "--token", DAEMON_TOKEN],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as waiting:
            waiting.register(process.stdout, selectors.EVENT_READ)
            assert waiting.select(30), "cairn serve printed nothing"
        line = process.stdout.readline()
        assert "listening on " in line, line
        yield line.split("listening on ")[1].split()[0]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


async def frames(http: httpx.AsyncClient, session_id: str, after: int) -> AsyncIterator[Any]:
    """The session's event envelopes after ``after``, as they come."""
    headers = {"Last-Event-ID": str(after)}
    async with http.stream("GET", f"/session/{session_id}/events", headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                yield json.loads(line[len("data: ") :])


async def run_prompts(http: httpx.AsyncClient, session_id: str, seen: Seen) -> int:
    """Send the prompts one by one, voting allow_once on every approval; the last event id."""
    last = 0
    for text in TURNS:
        admitted = await http.post(f"/session/{session_id}/prompt", json={"prompt": text})
        assert admitted.status_code == 202, admitted.text
        async for envelope in frames(http, session_id, last):
            last = envelope.get("id") or last
            kind, data = envelope["type"], envelope["data"]
            if kind == "session_update":
                seen.live.append(data)
            elif kind == "permission_request":
                seen.approvals.append({"toolCall": data["toolCall"], "options": data["options"]})
                vote = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                await http.post(f"/session/{session_id}/permission/{data['requestId']}", json=vote)
            elif kind in ("turn_complete", "turn_error"):
                break
    return last


async def through_daemon(env: dict[str, str], project: Path) -> Seen:
    seen = Seen()
    with daemon(env, project) as url:
        auth = {"Authorization": f"Bearer {DAEMON_TOKEN}"}
        async with httpx.AsyncClient(
            base_url=url, trust_env=False, timeout=30, headers=auth
        ) as http:
            session_id = (await http.post("/session", json={})).json()["sessionId"]
            await run_prompts(http, session_id, seen)
            assert (await http.delete(f"/session/{session_id}")).status_code == 204
            assert (await http.post(f"/session/{session_id}/load", json={})).status_code == 200
            async for envelope in frames(http, session_id, 0):
                if envelope["type"] == "replay_complete":
                    break
                if envelope["type"] == "session_update":
                    seen.replayed.append(envelope["data"])
    return seen


# ----- comparing -----


def renamed(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messageId`` values renamed ``m1``, ``m2`` ... in the order they first appear."""
    names: dict[str, str] = {}

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (names.setdefault(v, f"m{len(names) + 1}") if k == "messageId" else rename(v))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    return [rename(p) for p in payloads]


def kinds(payloads: list[dict[str, Any]]) -> list[str]:
    return [p["sessionUpdate"] for p in payloads]


async def test_acp_and_the_daemon_send_identical_session_updates(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], parity_project: Path
) -> None:
    script_turns(scripted_server)
    by_daemon = await through_daemon(cairn_env, parity_project)
    (parity_project / "greeting.txt").unlink()  # the editor's run starts from the same files
    script_turns(scripted_server)
    by_acp = await through_acp(cairn_env, parity_project, live=len(by_daemon.live))

    assert renamed(by_daemon.live) == renamed(by_acp.live)
    assert renamed(by_daemon.replayed) == renamed(by_acp.replayed)
    assert by_daemon.approvals == by_acp.approvals
    [approval] = by_acp.approvals
    assert approval["toolCall"]["toolCallId"] == "w1"
    # What the session did, so that equal streams cannot be equally empty:
    assert kinds(by_acp.live)[0] == "available_commands_update"
    for kind in ("agent_message_chunk", "tool_call", "tool_call_update", "plan", "usage_update"):
        assert kind in kinds(by_acp.live), kind
    [recap] = [p for p in by_acp.live if p.get("_meta", {}).get("cairn", {}).get("kind") == "recap"]
    assert recap["_meta"]["cairn"]["text"] == RECAP
    [replayed_recap] = [
        p for p in by_acp.replayed if p.get("_meta", {}).get("cairn", {}).get("kind") == "recap"
    ]
    assert replayed_recap["_meta"]["cairn"]["replayed"] is True
    assert "user_message_chunk" in kinds(by_acp.replayed)
    replayed_write = next(p for p in by_acp.replayed if p.get("toolCallId") == "w1")
    assert (replayed_write["kind"], replayed_write["title"]) == ("edit", "Write greeting.txt")
    assert (parity_project / "greeting.txt").read_text() == "hello\n"
