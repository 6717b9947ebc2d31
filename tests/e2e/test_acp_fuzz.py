"""Property (#18): whatever JSON-RPC a client sends, the real ``cairn --acp`` answers every
request exactly once, with its id, and keeps serving.

One agent process serves every example (a process per example would take seconds each); the
messages are drawn from the methods cairn serves, some it does not, and arbitrary params, with
the ids, cwds and session ids a real client would send mixed in.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.testing import ScriptedServer, reply
from cairn.testing.fixtures import isolated_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CAIRN = str(Path(sys.executable).parent / "cairn")
ANSWER_SECONDS = 30.0  # every request is answered within this (a turn against an instant model)
METHODS = (
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/close",
    "session/list",
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "_cairn/recap",
    "_cairn/retry",
    "fs/read_text_file",
    "no/such_method",
)


@dataclass
class RawAgent:
    process: subprocess.Popen[bytes]
    project: Path
    lines: queue.Queue[dict[str, Any] | None] = field(default_factory=queue.Queue)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    session_ids: list[str] = field(default_factory=list)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def answers(self, wanted: set[Any]) -> dict[Any, list[dict[str, Any]]]:
        """The responses to ``wanted`` ids (all of them, or the test fails naming the rest)."""
        got: dict[Any, list[dict[str, Any]]] = {}
        while not wanted <= got.keys():
            try:
                message = self.lines.get(timeout=ANSWER_SECONDS)
            except queue.Empty:
                missing = sorted(map(str, wanted - got.keys()))
                raise AssertionError(f"never answered: {missing}") from None
            assert message is not None, "the agent closed its stdout"
            if "method" in message:
                continue  # a session/update (or a request of the agent's own)
            got.setdefault(message.get("id"), []).append(message)
            if isinstance(message.get("result"), dict):
                session_id = message["result"].get("sessionId")
                if isinstance(session_id, str):
                    self.session_ids.append(session_id)
        return got


def _read(process: subprocess.Popen[bytes], lines: queue.Queue[dict[str, Any] | None]) -> None:
    assert process.stdout is not None
    for raw in process.stdout:
        lines.put(json.loads(raw))  # stdout carries JSON-RPC only: anything else fails here
    lines.put(None)


@pytest.fixture(scope="module")
def raw_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawAgent]:
    root = tmp_path_factory.mktemp("acp-fuzz")
    project = root / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".cairn").mkdir()
    (project / ".cairn" / "settings.json").write_text(
        json.dumps({"memory": {"enableManagedAutoMemory": False}})
    )
    with ScriptedServer(default=reply("ok")) as server:
        process = subprocess.Popen(
            [CAIRN, "--acp"],
            cwd=project,
            env=isolated_env(server.base_url, root),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        agent = RawAgent(process, project.resolve())
        threading.Thread(target=_read, args=(process, agent.lines), daemon=True).start()
        agent.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
        new = {"cwd": str(agent.project), "mcpServers": []}
        agent.send({"jsonrpc": "2.0", "id": -1, "method": "session/new", "params": new})
        agent.answers({0, -1})  # a session the examples can prompt, cancel, load, close
        try:
            yield agent
        finally:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
BLOCKS = st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "resource", "x"])})
    | st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=40)}),
    max_size=3,
)


@st.composite
def params(draw: st.DrawFn, agent: RawAgent) -> Any:
    """Params as a client might send them: the real cwd and session ids, or anything."""
    fields: dict[str, Any] = draw(st.dictionaries(st.text(max_size=8), JSON, max_size=3))

    # A choice among a fixed number of kinds, resolved against the ids the agent has answered so
    # far: sampling from that growing list itself drew differently from one example to the next
    # (hypothesis's FlakyStrategyDefinition).
    def session_id(kind: str) -> str:
        return {"newest": agent.session_ids[-1], "first": agent.session_ids[0]}.get(kind, kind)

    known = st.sampled_from(["newest", "first", "", "no-such-session"]).map(session_id)
    optional = {
        "cwd": st.sampled_from([str(agent.project), "relative", "/no/such/folder"]) | JSON,
        "sessionId": known | JSON,
        "prompt": BLOCKS | JSON,
        "mcpServers": st.just([]) | JSON,
        "protocolVersion": st.just(1) | JSON,
        "modeId": st.sampled_from(["plan", "default", "yolo", "reckless"]),
        "methodId": st.text(max_size=12),
        "additionalDirectories": st.lists(st.text(max_size=12), max_size=2),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), max_size=4, unique=True)):
        fields[key] = draw(optional[key])
    return draw(st.just(fields) | JSON)


@st.composite
def batches(draw: st.DrawFn, agent: RawAgent) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        method = draw(st.sampled_from(METHODS) | st.text(max_size=12))
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if draw(st.integers(0, 3)) > 0:  # mostly requests, some notifications
            number = next(agent.ids)
            message["id"] = number if draw(st.booleans()) else f"req-{number}"
        if draw(st.booleans()):
            message["params"] = draw(params(agent))
        messages.append(message)
    return messages


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_request_is_answered_once_and_the_agent_keeps_serving(
    raw_agent: RawAgent, data: st.DataObject
) -> None:
    batch = data.draw(batches(raw_agent))
    for message in batch:
        raw_agent.send(message)
    wanted = {m["id"] for m in batch if "id" in m}
    answers = raw_agent.answers(wanted)

    for request_id in wanted:
        [answer] = answers[request_id]  # exactly one answer per request
        assert ("result" in answer) != ("error" in answer)
        if "error" in answer:
            assert isinstance(answer["error"].get("code"), int)
            assert isinstance(answer["error"].get("message"), str)
    assert raw_agent.process.poll() is None
    raw_agent.send({"jsonrpc": "2.0", "id": "ping", "method": "session/list", "params": {}})
    assert "result" in raw_agent.answers({"ping"})["ping"][0]
