"""Routes that do not exist, and methods a route does not take, answer in the error envelope."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cairn.daemon.app import BootApp
from cairn.daemon.capabilities import capabilities
from cairn.daemon.config import DaemonConfig

from .helpers import RunningDaemon


async def test_an_unknown_route_is_a_json_404(daemon: RunningDaemon) -> None:
    response = await daemon.http.get("/nope")

    assert response.status_code == 404
    assert response.json() == {"error": "No route for GET /nope", "code": "not_found"}


async def test_a_wrong_method_is_a_json_405(daemon: RunningDaemon) -> None:
    response = await daemon.http.delete("/health")

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


# ----- BootApp: listening before the session runtime is loaded -----


class Recorder:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    @property
    def body(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.messages[1:]))


def scope(path: str, method: str = "GET", query: bytes = b"") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "query_string": query, "headers": []}


async def receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def test_health_answers_before_the_routes_are_ready() -> None:
    boot = BootApp()
    sent = Recorder()

    await boot(scope("/health"), receive, sent)

    assert (sent.status, sent.body) == (200, {"status": "ok"})


async def test_capabilities_answer_before_the_routes_are_ready(tmp_path: Path) -> None:
    """Regression (issue 32): the first /capabilities after boot waited for the session
    runtime to load (205 ms), though it needs only the daemon's configuration."""
    config = DaemonConfig(workspace=tmp_path, max_sessions=7)
    boot = BootApp(config)
    sent = Recorder()

    await boot(scope("/capabilities"), receive, sent)

    assert sent.status == 200
    assert sent.body == capabilities(config)
    assert sent.body["limits"]["maxSessions"] == 7


async def test_other_requests_wait_for_the_routes() -> None:
    boot = BootApp()
    sent = Recorder()
    waiting = asyncio.ensure_future(boot(scope("/session", "POST"), receive, sent))
    health = Recorder()
    # Tasks run in order: once a request sent after it is answered, it has reached its wait.
    await asyncio.ensure_future(boot(scope("/health"), receive, health))
    assert health.status == 200
    assert not waiting.done()

    async def routes(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b'{"ready": true}'})

    boot.ready(routes)
    await asyncio.wait_for(waiting, 1)

    assert (sent.status, sent.body) == (201, {"ready": True})


async def test_a_failed_start_answers_503() -> None:
    boot = BootApp()
    sent = Recorder()
    waiting = asyncio.ensure_future(boot(scope("/capabilities"), receive, sent))

    boot.failed("no runtime")
    await asyncio.wait_for(waiting, 1)

    assert sent.status == 503
    assert sent.body["code"] == "startup_failed"
