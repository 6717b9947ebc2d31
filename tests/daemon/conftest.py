"""Fixtures: an isolated CAIRN_HOME, a workspace, and in-process daemons on loopback ports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.daemon.config import DaemonConfig
from cairn.daemon.server import DaemonServer
from cairn.testing import ScriptedServer, reply

from .helpers import RunningDaemon, make_runtime

StartDaemon = Callable[..., Awaitable[RunningDaemon]]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cairn_home = tmp_path / "cairn-home"
    monkeypatch.setenv("CAIRN_HOME", str(cairn_home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return cairn_home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
async def start_daemon(
    scripted_server: ScriptedServer, workspace: Path, home: Path
) -> AsyncIterator[StartDaemon]:
    """Start a daemon with ``DaemonConfig`` overrides; every one is stopped after the test."""
    scripted_server.default = reply("ok")
    running: list[RunningDaemon] = []

    async def start(**overrides: Any) -> RunningDaemon:
        runtime = make_runtime(scripted_server, workspace)
        config = DaemonConfig(workspace=workspace, port=0, **overrides)
        server = DaemonServer(runtime, config)
        url = await server.start()
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        http = httpx.AsyncClient(
            base_url=url,
            trust_env=False,
            verify=False,  # noqa: S501 - plain HTTP to loopback: nothing to verify
            headers=headers,
            timeout=10,
        )
        daemon = RunningDaemon(server, runtime, url, http)
        running.append(daemon)
        return daemon

    yield start
    for daemon in running:
        await daemon.http.aclose()
        await daemon.server.stop()
        await daemon.runtime.aclose()


@pytest.fixture
async def daemon(start_daemon: StartDaemon) -> RunningDaemon:
    return await start_daemon()
