"""Issue #18's daemon and ACP findings, each replayed against a real process first.

The daemon runs as ``cairn serve`` on a loopback port, the ACP agent as ``cairn --acp`` fed raw
JSON lines, both against the scripted model server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.testing import ScriptedServer, reply, tool_call

from .conftest import write_settings
from .test_daemon import serve  # noqa: F401  (the fixture starting `cairn serve`)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ACP_CAIRN = str(Path(sys.executable).parent / "cairn")
TOKEN = "attack-token"
SURROGATE = "\ud800"
NESTED_DEPTH = 10_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def quiet_project(project: Path) -> Path:
    write_settings(project, {"memory": {"enableManagedAutoMemory": False}})
    return project


async def frames(http: httpx.AsyncClient, session_id: str, after: int = 0) -> AsyncIterator[Any]:
    headers = {"Last-Event-ID": str(after)}
    async with http.stream("GET", f"/session/{session_id}/events", headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                yield json.loads(line[len("data: ") :])


async def until(http: httpx.AsyncClient, session_id: str, kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(20):
        async for envelope in frames(http, session_id):
            seen.append(envelope)
            if envelope["type"] == kind:
                return seen
    return seen


@contextlib.asynccontextmanager
async def client(url: str, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(
        base_url=url, trust_env=False, timeout=20, headers=headers
    ) as http:
        yield http


# ----- the daemon: the strict approval-mode gate -----


async def test_a_new_session_cannot_start_in_yolo_without_a_token(
    serve: Any,  # noqa: F811
    quiet_project: Path,
) -> None:
    """Regression (#18): POST /session {"approvalMode": "yolo"} reached yolo without a token."""
    served = serve()
    async with client(served.url) as http:
        response = await http.post("/session", json={"approvalMode": "yolo"})
        narrower = await http.post("/session", json={"approvalMode": "plan"})

    assert response.status_code == 401
    assert response.json()["code"] == "token_required"
    assert narrower.status_code == 200 and narrower.json()["approvalMode"] == "plan"


async def test_a_loaded_session_cannot_be_widened_to_yolo_without_a_token(
    serve: Any,  # noqa: F811
    scripted_server: ScriptedServer,
    quiet_project: Path,
) -> None:
    """Regression (#18): POST /session/{id}/load {"approvalMode": "yolo"} reached yolo."""
    served = serve()
    scripted_server.default = reply("ok")
    async with client(served.url) as http:
        session_id = (await http.post("/session", json={})).json()["sessionId"]
        await http.post(f"/session/{session_id}/prompt", json={"prompt": "hi"})
        await until(http, session_id, "turn_complete")
        await http.delete(f"/session/{session_id}")

        response = await http.post(f"/session/{session_id}/load", json={"approvalMode": "yolo"})

    assert response.status_code == 401
    assert response.json()["code"] == "token_required"


async def test_an_approval_mode_command_cannot_widen_without_a_token(
    serve: Any,  # noqa: F811
    scripted_server: ScriptedServer,
    quiet_project: Path,
) -> None:
    """Regression (#18): a `/approval-mode yolo` prompt reached yolo without a token."""
    served = serve()
    async with client(served.url) as http:
        session_id = (await http.post("/session", json={})).json()["sessionId"]
        await http.post(f"/session/{session_id}/prompt", json={"prompt": "/approval-mode yolo"})
        seen = await until(http, session_id, "turn_complete")
        status = (await http.get(f"/session/{session_id}/status")).json()

    assert status["approvalMode"] == "default"
    assert "token" in seen[-1]["data"]["text"]
    assert not any(e["data"].get("sessionUpdate") == "current_mode_update" for e in seen)
    assert scripted_server.requests_for("main") == []


async def test_allow_always_cannot_be_voted_without_a_token(
    serve: Any,  # noqa: F811
    scripted_server: ScriptedServer,
    quiet_project: Path,
) -> None:
    """Regression (#18): a client voted allow_always on its own permission request without a
    token, so every later command of that kind ran unasked."""
    served = serve()
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "touch first"}, id="s1"),
        reply("done"),
        purpose="main",
    )
    async with client(served.url) as http:
        session_id = (await http.post("/session", json={})).json()["sessionId"]
        await http.post(f"/session/{session_id}/prompt", json={"prompt": "touch"})
        asked = [e for e in await until(http, session_id, "permission_request")][-1]["data"]
        vote = f"/session/{session_id}/permission/{asked['requestId']}"
        always = await http.post(
            vote, json={"outcome": {"outcome": "selected", "optionId": "allow_always"}}
        )
        once = await http.post(
            vote, json={"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        )
        await until(http, session_id, "turn_complete")

    assert always.status_code == 401 and always.json()["code"] == "token_required"
    assert once.status_code == 200  # the request stayed open for an answer that is allowed
    assert (quiet_project / "first").exists()
    assert [o["optionId"] for o in asked["options"]] == ["allow_once", "reject_once"]


async def test_with_a_token_the_same_widenings_are_allowed(
    serve: Any,  # noqa: F811
    quiet_project: Path,
) -> None:
    served = serve("--token", TOKEN)
    async with client(served.url, TOKEN) as http:
        response = await http.post("/session", json={"approvalMode": "yolo"})

    assert response.status_code == 200 and response.json()["approvalMode"] == "yolo"


# ----- the daemon: health, bodies, HTTP errors -----


async def test_deep_health_needs_the_token(
    serve: Any,  # noqa: F811
    quiet_project: Path,
) -> None:
    """Regression (#18): /health?deep=1 answered session and prompt counts without the token."""
    served = serve("--token", TOKEN)
    async with client(served.url) as http:
        plain = await http.get("/health")
        deep = await http.get("/health", params={"deep": "1"})
    async with client(served.url, TOKEN) as http:
        allowed = await http.get("/health", params={"deep": "1"})

    assert plain.status_code == 200
    assert deep.status_code == 401
    assert allowed.status_code == 200 and "sessions" in allowed.json()


async def test_bodies_nested_ten_thousand_deep_are_a_400(
    serve: Any,  # noqa: F811
    quiet_project: Path,
) -> None:
    """Regression (#18): bodies nested 10,000 deep got 500 internal_error on three routes."""
    served = serve()
    body = nested(NESTED_DEPTH).encode()
    headers = {"Content-Type": "application/json"}
    async with client(served.url) as http:
        session_id = (await http.post("/session", json={})).json()["sessionId"]
        answers = [
            await http.post(path, content=body, headers=headers)
            for path in (
                "/session",
                f"/session/{session_id}/prompt",
                f"/session/{session_id}/permission/x",
                f"/session/{session_id}/load",
            )
        ]
        alive = await http.get("/health")

    assert [a.status_code for a in answers] == [400, 400, 400, 400]
    assert all(a.json()["code"] == "invalid_json" for a in answers)
    assert alive.status_code == 200


def raw_request(url: str, request: bytes) -> bytes:
    """Send bytes as they are (httpx would refuse to send a malformed request)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def test_a_malformed_content_length_is_a_json_400(
    serve: Any,  # noqa: F811
    quiet_project: Path,
) -> None:
    """Regression (#18): HTTP-layer 400s were plain text, so invalid_content_length never
    appeared."""
    served = serve()
    host = served.url.removeprefix("http://")

    answer = await asyncio.to_thread(
        raw_request,
        served.url,
        f"POST /session HTTP/1.1\r\nHost: {host}\r\nContent-Length: ten\r\n\r\n{{}}".encode(),
    )

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert b"application/json" in head
    assert json.loads(body)["code"] == "invalid_content_length"


async def test_retry_must_be_a_boolean(
    serve: Any,  # noqa: F811
    quiet_project: Path,
) -> None:
    """Regression (#18): `"retry": "yes"` was accepted as true."""
    served = serve()
    async with client(served.url) as http:
        session_id = (await http.post("/session", json={})).json()["sessionId"]
        response = await http.post(f"/session/{session_id}/prompt", json={"retry": "yes"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_body"
    assert "retry" in response.json()["error"]


async def test_a_lone_surrogate_in_a_prompt_does_not_poison_the_session(
    serve: Any,  # noqa: F811
    scripted_server: ScriptedServer,
    quiet_project: Path,
) -> None:
    """Regression (#18): one lone surrogate in a prompt broke that turn and every later one
    with an internal error."""
    served = serve()
    scripted_server.default = reply("ok")
    body = b'{"prompt": "look at \\ud800 this"}'
    async with client(served.url) as http:
        session_id = (await http.post("/session", json={})).json()["sessionId"]
        first = await http.post(
            f"/session/{session_id}/prompt",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        await until(http, session_id, "turn_complete")
        await http.post(f"/session/{session_id}/prompt", json={"prompt": "and now?"})
        seen = await until_count(http, session_id, "turn_complete", 2)
        await http.delete(f"/session/{session_id}")
        reloaded = await http.post(f"/session/{session_id}/load", json={})

    assert first.status_code == 202
    ends = [e for e in seen if e["type"] in ("turn_complete", "turn_error")]
    assert [e["type"] for e in ends] == ["turn_complete", "turn_complete"]
    assert reloaded.status_code == 200
    assert "look at \ufffd this" in scripted_server.requests_for("main")[0].last_user_text()


async def until_count(
    http: httpx.AsyncClient, session_id: str, kind: str, count: int
) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(20):
        async for envelope in frames(http, session_id):
            seen.append(envelope)
            if sum(e["type"] == kind for e in seen) >= count:
                return seen
    return seen


# ----- ACP, as raw JSON lines -----


@dataclass
class RawAgent:
    """``cairn --acp`` spoken to line by line."""

    process: asyncio.subprocess.Process

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: Any, request_id: Any = None) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": request_id or method, "method": method, "params": params}
        await self.send(json.dumps(message).encode())
        return await self.answer(message["id"])

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """The response to ``request_id`` (notifications before it are skipped)."""
        assert self.process.stdout is not None
        async with asyncio.timeout(20):
            while True:
                line = await self.process.stdout.readline()
                assert line, "the agent closed its stdout"
                message = json.loads(line)
                if "method" not in message and message.get("id") == request_id:
                    return dict(message)


@pytest.fixture
async def raw_agent(cairn_env: dict[str, str], quiet_project: Path) -> AsyncIterator[RawAgent]:
    process = await asyncio.create_subprocess_exec(
        ACP_CAIRN,
        "--acp",
        cwd=quiet_project,
        env=cairn_env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=16 * 1024 * 1024,
    )
    agent = RawAgent(process)
    await agent.request("initialize", {"protocolVersion": 1})
    try:
        yield agent
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()


async def new_session(agent: RawAgent, project: Path) -> str:
    answer = await agent.request("session/new", {"cwd": str(project), "mcpServers": []})
    return str(answer["result"]["sessionId"])


async def test_acp_refuses_an_empty_prompt(
    raw_agent: RawAgent, scripted_server: ScriptedServer, quiet_project: Path
) -> None:
    """Regression (#18): an empty prompt list was accepted."""
    session_id = await new_session(raw_agent, quiet_project)

    answer = await raw_agent.request("session/prompt", {"sessionId": session_id, "prompt": []})

    assert answer["error"]["code"] == -32602
    assert scripted_server.requests_for("main") == []


async def test_acp_authenticate_with_an_unknown_method_is_an_error(raw_agent: RawAgent) -> None:
    """Regression (#18): authenticate accepted a method that was never advertised."""
    answer = await raw_agent.request("authenticate", {"methodId": "no-such-method"})

    assert answer["error"]["code"] == -32602
    assert "no-such-method" in json.dumps(answer["error"])


async def test_acp_answers_a_request_whose_id_is_a_lone_surrogate(raw_agent: RawAgent) -> None:
    """Regression (#18): a request whose id was a lone surrogate was never answered."""
    await raw_agent.send(
        b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "session/list", "params": {}}'
    )

    answer = await raw_agent.answer(SURROGATE)

    assert "result" in answer or "error" in answer


async def test_acp_survives_a_lone_surrogate_in_a_prompt(
    raw_agent: RawAgent, scripted_server: ScriptedServer, quiet_project: Path
) -> None:
    """Regression (#18): one lone surrogate in a prompt broke the live session: that turn and
    every later prompt failed with an internal error."""
    scripted_server.default = reply("ok")
    session_id = await new_session(raw_agent, quiet_project)
    await raw_agent.send(
        b'{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"sessionId": "'
        + session_id.encode()
        + b'", "prompt": [{"type": "text", "text": "look at \\ud800 this"}]}}'
    )
    first = await raw_agent.answer(7)
    second = await raw_agent.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": "and now?"}]},
    )

    assert first["result"]["stopReason"] == "end_turn"
    assert second["result"]["stopReason"] == "end_turn"
    assert "look at \ufffd this" in scripted_server.requests_for("main")[0].last_user_text()
