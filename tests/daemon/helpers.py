"""An in-process daemon on a free loopback port, serving a real runtime on the scripted model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cairn.config.loader import Endpoint
from cairn.config.settings import Settings
from cairn.daemon.server import DaemonServer
from cairn.session.runtime import Runtime
from cairn.testing import RecordedRequest, ScriptedServer
from cairn.testing.fixtures import TEST_API_KEY, TEST_MODEL

TOKEN = "s3cret-token"


def make_runtime(
    server: ScriptedServer, workspace: Path, *, task_checkpoint: bool = True
) -> Runtime:
    settings = Settings()
    settings.memory.enable_managed_auto_memory = False  # no Recall/Extract requests in the script
    settings.general.task_checkpoint = task_checkpoint
    endpoint = Endpoint(server.base_url, TEST_API_KEY, TEST_MODEL)
    return Runtime.from_endpoint(cwd=workspace, settings=settings, endpoint=endpoint)


@dataclass
class RunningDaemon:
    server: DaemonServer
    runtime: Runtime
    url: str
    http: httpx.AsyncClient

    @property
    def registry(self) -> Any:
        return self.server.registry

    async def create_session(self, **body: Any) -> str:
        response = await self.http.post("/session", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["sessionId"])

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        response = await self.http.post(f"/session/{session_id}/prompt", json={"prompt": text})
        assert response.status_code == 202, response.text
        return dict(response.json())


@dataclass
class Frame:
    id: int | None
    type: str
    data: dict[str, Any]


async def read_frames(response: httpx.Response) -> AsyncIterator[Frame | str]:
    """SSE frames of a streaming response; comments (heartbeats) come through as strings."""
    block: list[str] = []
    async for line in response.aiter_lines():
        if line:
            block.append(line)
            continue
        if not block:
            continue
        if all(b.startswith(":") for b in block):
            yield block[0]
        else:
            data = next(b[len("data: ") :] for b in block if b.startswith("data: "))
            envelope = json.loads(data)
            yield Frame(envelope.get("id"), envelope["type"], envelope["data"])
        block = []


async def collect_until(
    http: httpx.AsyncClient,
    session_id: str,
    stop: str,
    *,
    count: int = 1,
    last_event_id: int | None = 0,
    timeout: float = 10,
) -> list[Frame]:
    """Frames of the session's stream up to and including the ``count``-th of type ``stop``."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    frames: list[Frame] = []
    async with (
        asyncio.timeout(timeout),
        http.stream("GET", f"/session/{session_id}/events", headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        async for frame in read_frames(response):
            if isinstance(frame, Frame):
                frames.append(frame)
                if frame.type == stop and len(of_type(frames, stop)) == count:
                    return frames
    return frames


def of_type(frames: list[Frame], kind: str) -> list[Frame]:
    return [f for f in frames if f.type == kind]


def updates(frames: list[Frame], kind: str) -> list[dict[str, Any]]:
    return [
        f.data for f in frames if f.type == "session_update" and f.data["sessionUpdate"] == kind
    ]


# The first prompt after an interrupted turn carries where the task stood (issue #29) before
# what the user typed; whether a resumed replica's does depends on whether it rebuilt the session.
_REMINDER = re.compile(r"\A<system-reminder>.*?</system-reminder>\s*", re.DOTALL)


def said(request: RecordedRequest) -> str:
    """What the user typed in a request: its last user text without the reminder cairn may put
    before it."""
    return _REMINDER.sub("", request.last_user_text())
