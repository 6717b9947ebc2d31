"""Starting and stopping the daemon; what run_daemon refuses before it listens."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from cairn.daemon.config import DaemonConfig
from cairn.daemon.server import DaemonServer, run_daemon
from cairn.testing import Reply, ScriptedServer

from .helpers import Frame, RunningDaemon, make_runtime, read_frames


async def test_the_daemon_listens_on_a_loopback_port(daemon: RunningDaemon) -> None:
    assert daemon.url == f"http://127.0.0.1:{daemon.server.port}"
    assert (await daemon.http.get("/health")).status_code == 200


async def test_stopping_closes_sessions_and_ends_their_streams(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(Reply(text="never", delay=10), purpose="main")
    await daemon.prompt(session_id, "slow work")
    await scripted_server.async_wait_for_requests(1, purpose="main")
    live = daemon.registry.get(session_id)
    frames: list[Frame] = []

    async def read() -> None:
        async with daemon.http.stream("GET", f"/session/{session_id}/events") as response:
            async for frame in read_frames(response):
                if isinstance(frame, Frame):
                    frames.append(frame)

    reader = asyncio.ensure_future(read())
    while live.bus.subscriber_count == 0:
        await asyncio.sleep(0.01)

    await asyncio.wait_for(daemon.server.stop(), 5)
    await asyncio.wait_for(reader, 5)

    kinds = [f.type for f in frames]
    assert kinds[-2:] == ["turn_complete", "session_closed"]
    assert frames[-2].data["stopReason"] == "cancelled"
    assert frames[-1].data["reason"] == "daemon_shutdown"
    assert live.session.recorder is not None
    recording = live.session.recorder.path.read_text()
    assert "slow work" in recording


async def test_a_taken_port_is_an_os_error(
    scripted_server: ScriptedServer, workspace: Path, home: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        runtime = make_runtime(scripted_server, workspace)
        server = DaemonServer(
            runtime, DaemonConfig(workspace=workspace, port=taken.getsockname()[1])
        )

        with pytest.raises(OSError):
            await server.start()
        await runtime.aclose()


def test_run_daemon_refuses_a_public_bind_without_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_daemon(
        host="0.0.0.0", port=0, token=None, allow_origins=[], max_sessions=4, workspace=tmp_path
    )

    assert code == 42
    assert "without a token" in capsys.readouterr().err


def test_run_daemon_reports_an_unusable_settings_file(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text("{ not json")

    code = run_daemon(
        host="127.0.0.1", port=0, token=None, allow_origins=[], max_sessions=4, workspace=tmp_path
    )

    assert code == 52
    assert "settings.json" in capsys.readouterr().err


def test_run_daemon_without_a_model_endpoint_says_so(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)

    code = run_daemon(
        host="127.0.0.1", port=0, token=None, allow_origins=[], max_sessions=4, workspace=tmp_path
    )

    assert code == 41
    assert capsys.readouterr().err.startswith("cairn serve: ")
