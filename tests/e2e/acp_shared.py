"""One ``cairn --acp`` process for many tests of a module, each test with its own sessions.

Starting ``cairn --acp`` and opening its first session costs about a second of CPU, most of the
ACP tests' cost. ACP lets one connection hold several sessions, each with its own working folder,
so a module starts one agent per command line and client capabilities (lazily, on first use) and
each test opens its own sessions, in its own project folder, with its own client:

- **Its own client.** The connection's client is a :class:`SessionRouter`: every call and
  notification the agent sends names a session, and goes to the client of the test that opened
  it (updates sent before the test knew the session's id are kept for it), so a test sees only
  what its own sessions sent.
- **Its own project.** Each test's sessions run in its own project folder: their own runtime
  with that folder's settings, their own recordings and session list.
- **Its own script.** The module's scripted model server is cleared before each test (its
  queues, handler, default and recorded requests); when the test ends, its sessions are closed
  (a turn still running is cancelled), and every model request the server recorded during the
  test must carry one of the test's session ids: a request left over from another test fails
  the test instead of passing unseen.

Tests that start, kill, misfeed or misconfigure the process, read its stderr, or need a fresh
process (loading a recording made by another one) keep a process of their own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import ClientCapabilities, TextContentBlock
from acp.stdio import spawn_agent_process

from cairn.testing import ScriptedServer

__all__ = [
    "OwnConnection",
    "OwnSessions",
    "SessionRouter",
    "SharedAgent",
    "module_server",
    "reset_script",
    "scripted_server",
    "shared_agent",
]

CLIENT_REQUESTS = (
    "request_permission",
    "read_text_file",
    "write_text_file",
    "create_terminal",
    "terminal_output",
    "wait_for_terminal_exit",
    "kill_terminal",
    "release_terminal",
)


class SessionRouter:
    """The client of a shared agent: each call goes to the client of the session it names."""

    def __init__(self) -> None:
        self._clients: dict[str, Any] = {}
        self._early: dict[str, list[tuple[Any, dict[str, Any]]]] = {}  # before register()
        self._asked: dict[Any, Any] = {}  # the id of a request the agent sent -> its client

    async def register(self, session_id: str, client: Any) -> None:
        """From now on ``client`` gets what concerns ``session_id``, and what came already."""
        self._clients[session_id] = client
        for update, meta in self._early.pop(session_id, []):
            await client.session_update(session_id, update, **meta)

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        client = self._clients.get(session_id)
        if client is None:  # sent right after session/new answered, before the test registered
            self._early.setdefault(session_id, []).append((update, meta))
            return
        await client.session_update(session_id, update, **meta)

    def __getattr__(self, name: str) -> Any:
        if name not in CLIENT_REQUESTS:
            raise AttributeError(name)

        async def forward(session_id: str, **params: Any) -> Any:
            handler = getattr(self._clients[session_id], name, None)
            if handler is None:  # as the SDK answers for a client without it (optional methods)
                return None
            return await handler(session_id, **params)

        return forward

    def observe(self, event: StreamEvent) -> None:
        """Hand a raw incoming message to the ``observe`` of the client it concerns: the one of
        the session it names, or the one the request it withdraws was sent to."""
        if event.direction.value != "incoming":
            return
        message = event.message
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        client = self._clients.get(params.get("sessionId"))  # type: ignore[arg-type]
        if client is None and message.get("method") == "$/cancel_request":
            client = self._asked.get(params.get("requestId"))
        if client is None:
            return
        if "method" in message and "id" in message:
            self._asked[message["id"]] = client
        if (observe := getattr(client, "observe", None)) is not None:
            observe(event)


@dataclass
class SharedAgent:
    """A running ``cairn --acp``, initialized once with ``capabilities``, serving tests."""

    conn: ClientSideConnection
    router: SessionRouter
    server: ScriptedServer
    env: dict[str, str]
    capabilities: ClientCapabilities
    initialized: Any  # the agent's answer to initialize

    @contextlib.asynccontextmanager
    async def attach(self, project: Path, *, client: Any) -> AsyncIterator[OwnSessions]:
        """One test's use of the agent: ``client`` sees its sessions; closed and checked after."""
        sessions = OwnSessions(self, client, project)
        try:
            yield sessions
        finally:
            await sessions.end()


@dataclass
class OwnSessions:
    """What a test holds of a shared agent: the ``Agent`` of test_acp_process, for sessions of its
    own (``conn`` opens, loads and resumes sessions for this test's client)."""

    shared: SharedAgent
    client: Any
    project: Path
    ids: list[str] = field(default_factory=list)

    @property
    def conn(self) -> OwnConnection:
        return OwnConnection(self)

    async def start_session(self, **capabilities: Any) -> str:
        wanted = ClientCapabilities.model_validate(capabilities)
        assert wanted == self.shared.capabilities, (
            f"the shared agent was initialized with {self.shared.capabilities!r}, not {wanted!r}"
        )
        return (await self.conn.new_session(cwd=str(self.project))).session_id

    async def prompt(self, session_id: str, text: str) -> Any:
        return await self.shared.conn.prompt(
            session_id=session_id, prompt=[TextContentBlock(type="text", text=text)]
        )

    async def own(self, session_id: str) -> None:
        """``session_id`` is this test's: its client gets what the agent sends about it."""
        self.ids.append(session_id)
        await self.shared.router.register(session_id, self.client)

    async def end(self) -> None:
        """Close this test's sessions (one already closed is refused: fine), then check that
        every model request since the test began came from one of them."""
        for session_id in self.ids:
            with contextlib.suppress(Exception):
                await self.shared.conn.close_session(session_id=session_id)
        foreign = [r for r in self.shared.server.requests if r.session_id not in self.ids]
        assert not foreign, f"model requests of another test's sessions: {foreign!r}"


@dataclass
class OwnConnection:
    """The shared connection as one test uses it: the sessions it opens, loads or resumes are
    the test's; every other method is the connection's own (cancel, close_session, ...)."""

    sessions: OwnSessions

    async def new_session(self, **params: Any) -> Any:
        response = await self.sessions.shared.conn.new_session(**params)
        await self.sessions.own(response.session_id)
        return response

    async def load_session(self, *, session_id: str, **params: Any) -> Any:
        await self.sessions.own(session_id)
        return await self.sessions.shared.conn.load_session(session_id=session_id, **params)

    async def resume_session(self, *, session_id: str, **params: Any) -> Any:
        await self.sessions.own(session_id)
        return await self.sessions.shared.conn.resume_session(session_id=session_id, **params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sessions.shared.conn, name)


SCRIPT_FIELDS = (
    "handler",
    "default",
    "models",
    "unsupported",
    "response_formats",
    "prompt_cache",
    "local",
)


@pytest.fixture(scope="module")
def module_server() -> Iterator[ScriptedServer]:
    """The model server of a module's shared agents."""
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def scripted_server(module_server: ScriptedServer) -> ScriptedServer:
    """The shared agents' model server, with this test's script only (imported by a module, it
    replaces the ``cairn`` plugin's: ``cairn_env`` points there too)."""
    return reset_script(module_server)


def reset_script(server: ScriptedServer) -> ScriptedServer:
    """The module's scripted server with nothing scripted or recorded, as a new one starts: a
    test's own script."""
    server.clear()
    fresh = ScriptedServer()  # not started: only its script's defaults are read
    for name in SCRIPT_FIELDS:
        setattr(server, name, getattr(fresh, name))
    return server


@contextlib.asynccontextmanager
async def shared_agent(
    command: Sequence[str],
    *args: str,
    server: ScriptedServer,
    env: dict[str, str],
    cwd: Path,
    stderr: Path,
    transport: dict[str, Any],
    **capabilities: Any,
) -> AsyncIterator[SharedAgent]:
    """Start ``*command --acp *args`` in ``cwd`` and initialize it with ``capabilities``."""
    router = SessionRouter()
    with stderr.open("wb") as errors:
        async with spawn_agent_process(
            router,
            command[0],
            *command[1:],
            "--acp",
            *args,
            env=env,
            cwd=cwd,
            transport_kwargs={"stderr": errors.fileno(), **transport},
            observers=[router.observe],
        ) as (conn, _process):
            chosen = ClientCapabilities.model_validate(capabilities)
            initialized = await conn.initialize(protocol_version=1, client_capabilities=chosen)
            yield SharedAgent(conn, router, server, env, chosen, initialized)
