"""The daemon's first request of each kind is warm: once the daemon is ready and warmed up, no
request imports a module (the first POST /session, prompt, rewind list, recap, load...).

A probe runs the daemon as ``cairn serve`` does (the server, then the runtime loaded in a worker
thread) and sends the requests over a plain socket from a thread, noting what each imported.
Only *what* is imported is checked, never how long a request takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from .conftest import run_probed

pytestmark = pytest.mark.slow

PROBE = """
import asyncio, http.client, json, sys, threading
from pathlib import Path

from cairn.daemon.config import DaemonConfig
from cairn.daemon.server import DaemonServer
from cairn.session.startup import load_startup

imported = {}


def client(port):
    def request(method, path, body=None, until=None):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = connection.getresponse()
        if until is None:
            return response.status, response.read()
        while until not in response.fp.readline():
            pass
        return response.status, b""

    def step(name, *args, **kwargs):
        before = set(sys.modules)
        status, body = request(*args, **kwargs)
        imported[name] = sorted(set(sys.modules) - before)
        assert status < 300, (name, status, body)
        return body

    step("capabilities", "GET", "/capabilities")
    step("session list", "GET", "/workspace/sessions")
    session = json.loads(step("new session", "POST", "/session", {}))["sessionId"]
    for route in ("status", "commands", "model", "rewind"):
        step(route, "GET", f"/session/{session}/{route}")
    stream = ("GET", f"/session/{session}/events")
    events = threading.Thread(target=request, args=stream, kwargs={"until": b"turn_complete"})
    before = set(sys.modules)
    events.start()
    prompt = {"prompt": [{"type": "text", "text": "hi"}]}
    step("prompt", "POST", f"/session/{session}/prompt", prompt)
    events.join()
    imported["turn"] = sorted(set(sys.modules) - before)
    step("recap", "POST", f"/session/{session}/recap", {})
    step("approval mode", "POST", f"/session/{session}/approval-mode", {"mode": "plan"})
    step("close", "DELETE", f"/session/{session}")
    step("load", "POST", f"/session/{session}/load", {})


async def main():
    workspace = Path.cwd().resolve()
    server = DaemonServer(None, DaemonConfig(workspace=workspace, port=0))
    await server.start()
    startup = load_startup(workspace)
    await server.load(lambda: startup.open_runtime())
    await server.warmed()
    try:
        await asyncio.to_thread(client, server.port)
    finally:
        await server.stop()
        await server.runtime.aclose()


asyncio.run(main())
sys.stderr.write("IMPORTED " + json.dumps(imported) + "\\n")
"""


def test_after_its_warm_up_the_daemon_imports_nothing_on_a_first_request(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    """Regression (issue 32): the first request of each kind imported what it needed (the
    tools, the recording, /rewind's modules, httpx's connection code...) while its client
    waited."""
    scripted_server.enqueue(reply("Hello."), purpose="main")

    done = run_probed(PROBE, project, cairn_env)

    line = next(x for x in done.stderr.splitlines() if x.startswith("IMPORTED "))
    imported = json.loads(line.removeprefix("IMPORTED "))
    assert "turn" in imported and "load" in imported  # every step ran
    assert {name: modules for name, modules in imported.items() if modules} == {}
