"""An in-process ACP client for the agent tests: the real agent over real pipes.

:func:`connect` runs :func:`cairn.acp.main.serve` (the same code ``cairn --acp`` runs) on one
pair of OS pipes and the SDK's own :class:`ClientSideConnection` on the other ends, with a
:class:`RecordingClient` that records every notification and raw message and answers the
agent's requests (permissions, questions, files) the way a test scripts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.exceptions import RequestError
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    CancelElicitationResponse,
    DeniedOutcome,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

from cairn.acp.agent import AgentOptions
from cairn.acp.main import serve
from cairn.config.loader import Endpoint
from cairn.config.settings import Settings
from cairn.testing import ScriptedServer
from cairn.testing.fixtures import TEST_API_KEY, TEST_MODEL

from ..polling import DEADLINE_SECONDS


def editor_read(
    path: str, buffers: Mapping[str, str], refused: Mapping[str, str]
) -> ReadTextFileResponse:
    """An editor's answer to ``fs/read_text_file``: a refusal, its unsaved buffer, or the disk."""
    if path in refused:
        raise RequestError.invalid_params({"details": refused[path]})
    if path in buffers:
        return ReadTextFileResponse(content=buffers[path])
    try:  # a file the editor has no buffer for: it reads it from disk, as Zed does
        return ReadTextFileResponse(content=Path(path).read_text())
    except OSError:
        raise RequestError.resource_not_found(path) from None


FS_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}}
FORM_CAPABILITIES = {"elicitation": {"form": {}}}


@dataclass
class RecordingClient:
    """The editor: records what the agent sends and answers its requests from scripts."""

    permission_answers: deque[str | None] = field(default_factory=deque)  # None: cancelled
    default_permission: str = "allow_once"
    form_answers: deque[dict[str, Any] | None] = field(default_factory=deque)
    buffers: dict[str, str] = field(default_factory=dict)  # path -> unsaved editor text
    refused: dict[str, str] = field(default_factory=dict)  # path -> why the editor refuses it
    updates: list[tuple[str, Any]] = field(default_factory=list)
    permission_requests: list[Any] = field(default_factory=list)
    elicitations: list[Any] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: dict[str, str] = field(default_factory=dict)
    wire: list[dict[str, Any]] = field(default_factory=list)  # raw messages from the agent
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **_kw: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_kw: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call, options))
        self.asked.set()
        answer = (
            self.permission_answers.popleft()
            if self.permission_answers
            else self.default_permission
        )
        if answer == "wait":  # never answered: the agent must cancel it
            await asyncio.Event().wait()
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def create_elicitation(self, message: str, mode: Any, **_kw: Any) -> Any:
        self.elicitations.append((message, mode))
        self.asked.set()
        answer = self.form_answers.popleft() if self.form_answers else None
        if answer is None:
            return CancelElicitationResponse(action="cancel")
        return AcceptElicitationResponse(action="accept", content=answer)

    async def read_text_file(self, session_id: str, path: str, **_kw: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        return editor_read(path, self.buffers, self.refused)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **_kw: Any
    ) -> WriteTextFileResponse:
        self.writes[path] = content
        return WriteTextFileResponse()

    def observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.wire.append(event.message)

    # ----- reading what was recorded -----

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [
            u.session_update for sid, u in self.updates if session_id is None or sid == session_id
        ]

    def of_kind(self, kind: str) -> list[Any]:
        return [u for _sid, u in self.updates if u.session_update == kind]

    def agent_text(self) -> str:
        return "".join(u.content.text for u in self.of_kind("agent_message_chunk"))


def agent_options(
    server: ScriptedServer, cwd: Path, *, approval_mode: str | None = None, **settings: Any
) -> AgentOptions:
    return AgentOptions(
        cwd=cwd,
        settings=Settings.model_validate(settings),
        endpoint=Endpoint(server.base_url, TEST_API_KEY, TEST_MODEL),
        approval_mode=approval_mode,
    )


@contextlib.asynccontextmanager
async def connect(
    options: AgentOptions, client: RecordingClient | None = None
) -> AsyncIterator[tuple[ClientSideConnection, RecordingClient]]:
    """A connected client; on exit the client closes its end and the agent shuts down."""
    client = client or RecordingClient()
    loop = asyncio.get_running_loop()
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    agent_in, agent_out = os.fdopen(to_agent_r, "rb", 0), os.fdopen(from_agent_w, "wb", 0)
    serving = asyncio.ensure_future(serve(options, agent_in, agent_out, memory_wait=0))
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    read_pipe, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(from_agent_r, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(to_agent_w, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    conn = ClientSideConnection(
        client, writer, reader, observers=[client.observe], use_unstable_protocol=True
    )
    try:
        yield conn, client
    finally:
        transport.close()  # EOF for the agent: it shuts down
        await asyncio.wait_for(serving, DEADLINE_SECONDS)
        await conn.close()
        read_pipe.close()


async def send_raw(conn: ClientSideConnection, method: str, params: Any) -> Any:
    """A request the typed client API cannot make (an unknown or extension method)."""
    return await conn._conn.send_request(method, params)
