"""An in-process daemon on a free loopback port for the SDK to talk to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairn.config.loader import Endpoint
from cairn.config.settings import Settings
from cairn.daemon.config import DaemonConfig
from cairn.daemon.server import DaemonServer
from cairn.session.runtime import Runtime
from cairn.testing import ScriptedServer, reply
from cairn.testing.fixtures import TEST_API_KEY, TEST_MODEL


@dataclass
class Daemon:
    server: DaemonServer
    runtime: Runtime
    url: str


StartDaemon = Callable[..., Awaitable[Daemon]]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
async def start_daemon(
    scripted_server: ScriptedServer, workspace: Path
) -> AsyncIterator[StartDaemon]:
    scripted_server.default = reply("ok")
    running: list[Daemon] = []

    async def start(**overrides: Any) -> Daemon:
        settings = Settings()
        settings.memory.enable_managed_auto_memory = False
        endpoint = Endpoint(scripted_server.base_url, TEST_API_KEY, TEST_MODEL)
        runtime = Runtime.from_endpoint(cwd=workspace, settings=settings, endpoint=endpoint)
        config = DaemonConfig(workspace=workspace, **{"port": 0, **overrides})
        server = DaemonServer(runtime, config)
        daemon = Daemon(server, runtime, await server.start())
        running.append(daemon)
        return daemon

    yield start
    for daemon in running:
        await daemon.server.stop()
        await daemon.runtime.aclose()


@pytest.fixture
async def daemon(start_daemon: StartDaemon) -> Daemon:
    return await start_daemon()
