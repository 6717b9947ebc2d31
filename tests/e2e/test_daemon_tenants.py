"""Tenants of one real ``cairn serve --tenant-header`` never reach each other (#24): not through
a route, not through a tool, not through a shell command (real processes, real bubblewrap)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.config.settings import Settings
from cairn.memory.manager import MemoryManager
from cairn.memory.store.backend import TENANT_NAME
from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call

from ..entry_point import run_main
from ..memory.postgres_helpers import postgres_dsn, postgres_server
from ..memory.store.test_backend_contract import write
from ..polling import eventually
from .conftest import CAIRN, write_settings
from .test_daemon import Served, launch, reap

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOKEN = "tenants-token"
HEADER = "X-Cairn-Tenant"
STATUS_WAIT_SECONDS = 60.0  # for a daemon to end a turn or ask for a permission under load
ATTACK = "ATTACK "  # a prompt "ATTACK {json}" makes the model call that tool
SECRET = "ACME-SECRET-7731"  # in acme's recordings and memory only
SECRET_PATTERN = "ACME-SECRET-77[3]1"  # finds SECRET without spelling it
MEMORY = f"""---
name: Acme billing
description: How acme bills
type: project
---

Acme bills monthly. {SECRET}
"""


def attack(name: str, args: dict[str, Any]) -> str:
    return ATTACK + json.dumps({"name": name, "args": args})


def attacker(request: RecordedRequest) -> Reply | None:
    """The model: a prompt ``ATTACK {"name", "args"}`` calls that tool (in a subagent too);
    after a tool result it says "done"."""
    if request.purpose not in ("main", "subagent"):
        return None
    if request.messages and request.messages[-1].get("role") == "tool":
        return reply("done")
    text = request.last_user_text()
    start = text.find(ATTACK)
    if start < 0:
        return None
    spec = json.loads(text[start + len(ATTACK) :].splitlines()[0])
    return tool_call(spec["name"], spec["args"])


@pytest.fixture
def tenant_daemon(
    cairn_env: dict[str, str], project: Path, scripted_server: ScriptedServer
) -> Iterator[Callable[..., Served]]:
    """``start(env=None)``: a real ``cairn serve`` serving tenants, with the attacker model."""
    scripted_server.handler = attacker  # type: ignore[assignment]
    scripted_server.default = reply("ok")
    started: list[Served] = []

    def start(env: dict[str, str] | None = None) -> Served:
        args = ("--token", TOKEN, "--tenant-header", HEADER)
        served = launch(args, cwd=project, env=env or cairn_env)
        started.append(served)
        return served

    yield start
    reap(started)


def client(served: Served, tenant: str) -> DaemonClient:
    return DaemonClient(served.url, TOKEN, headers={HEADER: tenant})


def not_acmes(server: ScriptedServer, acme_sessions: set[str]) -> list[RecordedRequest]:
    """Every model request made for a session that is not acme's."""
    return [r for r in server.requests if r.session_id not in acme_sessions]


@pytest.mark.parametrize("backend", ["files", "postgres"])
async def test_a_tenants_shell_command_cannot_read_another_tenants_recordings_or_memory(
    tenant_daemon: Callable[..., Served],
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    request: pytest.FixtureRequest,
    backend: str,
) -> None:
    """#24 High: "tenants reach each other": a tenant's shell command `cat`s another tenant's
    chat recordings under $CAIRN_HOME (files and PostgreSQL backends)."""
    home = Path(cairn_env["CAIRN_HOME"])
    env = dict(cairn_env)
    if backend == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        env["CAIRN_MEMORY_DSN"] = dsn
        write_settings(project, {"memory": {
            "backend": "postgres", "enableManagedAutoDream": False,
            "postgres": {"namespace": "billing"},
        }})  # fmt: skip
        settings = Settings.model_validate(
            {"memory": {"backend": "postgres", "postgres": {"namespace": "billing"}}}
        )
        planter = MemoryManager(project, settings=settings, environ=env, tenant="acme")
        assert planter.backend.name == "postgres", planter.backend_error
        write(planter, "project/billing.md", MEMORY)
        planter.close()
    else:
        planter = MemoryManager(project, settings=Settings(), environ=env, tenant="acme")
        write(planter, "project/billing.md", MEMORY)
        planter.close()
    served = tenant_daemon(env)

    async with client(served, "acme") as acme, client(served, "globex") as globex:
        own = await DaemonSessionClient.create(acme)
        await own.prompt_and_wait(f"remember {SECRET}")
        [recording] = home.rglob(f"{own.session_id}.jsonl")
        assert SECRET in recording.read_text()
        spy = await DaemonSessionClient.create(globex, approval_mode="yolo")
        command = f"cat {recording}; grep -rs {SECRET_PATTERN} {home} {project.parent}; env"
        await spy.prompt_and_wait(attack("run_shell_command", {"command": command}))

    [_, answered] = [
        r for r in scripted_server.requests_for("main") if r.session_id == spy.session_id
    ]
    [result] = [m["content"] for m in answered.messages if m["role"] == "tool"]
    assert f"cat: {recording}: No such file or directory" in result  # it ran, fenced
    for seen in not_acmes(scripted_server, {own.session_id}):
        assert not seen.contains(SECRET), seen.messages[-1]
        if backend == "postgres":
            assert not seen.contains(env["CAIRN_MEMORY_DSN"])


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("memory_local", "CAIRN_MEMORY_LOCAL=1 keeps memory in the workspace"),
        ("sandbox_off", "CAIRN_SANDBOX=0 turns the shell sandbox off"),
        ("network", "tools.sandbox.network is 'loopback'"),
        ("home_inside", "lies inside the workspace"),
        ("reexposed", "tools.sandbox.readOnlyPaths lists"),
        ("private_fetch", "tools.webFetch.allowPrivateAddresses is on"),
    ],
)
def test_tenant_mode_refuses_to_start_where_tenants_could_reach_each_other(
    cairn_env: dict[str, str], project: Path, case: str, expected: str
) -> None:
    """#24 High: tenant mode must imply the sandbox (or refuse to start without it) and refuse
    CAIRN_MEMORY_LOCAL: with it, one tenant's `/memory` listed another's. The first case runs
    ``cairn serve`` as a process, the others through its entry point in this process."""
    env = dict(cairn_env)
    settings: dict[str, Any] = {"memory": {"enableManagedAutoMemory": False}}
    if case == "memory_local":
        env["CAIRN_MEMORY_LOCAL"] = "1"
    elif case == "sandbox_off":
        env["CAIRN_SANDBOX"] = "0"
    elif case == "network":
        settings["tools"] = {"sandbox": {"network": "loopback"}}
    elif case == "home_inside":
        env["CAIRN_HOME"] = str(project / "state")
    elif case == "reexposed":
        settings["tools"] = {"sandbox": {"readOnlyPaths": [env["CAIRN_HOME"]]}}
    else:
        settings["tools"] = {"webFetch": {"allowPrivateAddresses": True}}
    write_settings(project, settings)
    if case in (
        "network",
        "reexposed",
        "private_fetch",
    ):  # the sandbox settings of the project need trust
        user_settings = Path(env["CAIRN_HOME"]) / "settings.json"
        user_settings.parent.mkdir(parents=True, exist_ok=True)
        user_settings.write_text(json.dumps({"security": {"trustedFolders": [str(project)]}}))

    args = ["serve", "--port", "0", "--token", TOKEN, "--tenant-header", HEADER]
    if case == "memory_local":
        done = subprocess.run([*CAIRN, *args], cwd=project, env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    else:
        done = run_main(args, cwd=project, env=env)

    assert done.returncode == 42, done.stderr
    assert "refusing to serve tenants that could reach each other's files" in done.stderr
    assert expected in done.stderr
    assert "listening" not in done.stdout


# ----- isolation across every route and every tool ------------------------------------------

# Routes that are the operator's (load balancers, the proxy): no tenant; they never name a
# tenant's session or content. Every other route must be a tenant's.
OPERATOR_ROUTES = {("GET", "/health"), ("GET", "/ready"), ("GET", "/capabilities")}
# Tools that touch no file, address or session: nothing of another tenant's to reach.
NO_REACH_TOOLS = {
    "todo_write": "keeps the session's own list",
    "ask_user_question": "asks the session's own client",
}


def daemon_routes(workspace: Path) -> list[tuple[str, str]]:
    """Every (method, path) the daemon's app serves, read from the app itself."""
    from cairn.daemon.app import create_routes_app
    from cairn.daemon.config import DaemonConfig
    from cairn.daemon.routes import DaemonRoutes
    from cairn.daemon.sessions import SessionRegistry
    from cairn.session.runtime import Runtime
    from cairn.testing import ScriptedProvider

    config = DaemonConfig(workspace=workspace, token=TOKEN, tenant_header=HEADER)
    runtime = Runtime(cwd=workspace, settings=Settings(), provider=ScriptedProvider())
    app = create_routes_app(DaemonRoutes(SessionRegistry(runtime, config), config))
    return sorted(
        (method, route.path) for route in app.routes for method in route.methods if method != "HEAD"
    )


class Acme:
    """What tenant acme holds: a live session waiting on a permission request, a recorded
    (closed) session, a memory; everything with :data:`SECRET` in it."""

    def __init__(self, served: Served, home: Path, project: Path) -> None:
        self.served, self.home, self.project = served, home, project
        self.http = httpx.Client(
            base_url=served.url, trust_env=False, timeout=30,
            headers={"Authorization": f"Bearer {TOKEN}", HEADER: "acme"},
        )  # fmt: skip
        planter = MemoryManager(project, settings=Settings(), tenant="acme",
                                environ={"CAIRN_HOME": str(home)})  # fmt: skip
        self.memory = write(planter, "project/billing.md", MEMORY)
        planter.close()
        self.recorded = self._session()
        self._prompt(self.recorded, f"remember {SECRET}")
        self._wait_idle(self.recorded)
        assert self.http.delete(f"/session/{self.recorded}").status_code == 204
        [self.recording] = home.rglob(f"{self.recorded}.jsonl")
        self.live = self._session()
        self._prompt(self.live, attack("write_file", {"file_path": "x.md", "content": SECRET}))
        self.request_id = self._pending_request()

    def _session(self) -> str:
        answer = self.http.post("/session", json={})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["sessionId"])

    def _prompt(self, session_id: str, text: str) -> None:
        answer = self.http.post(f"/session/{session_id}/prompt", json={"prompt": text})
        assert answer.status_code == 202, answer.text

    def status(self, session_id: str) -> dict[str, Any]:
        answer = self.http.get(f"/session/{session_id}/status")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def _wait_idle(self, session_id: str) -> None:
        assert eventually(
            lambda: (
                self.status(session_id)["turns"] >= 1
                and not self.status(session_id)["hasActivePrompt"]
            ),
            STATUS_WAIT_SECONDS,
        )

    def _pending_request(self) -> str:
        assert eventually(
            lambda: bool(self.status(self.live)["pendingPermissions"]), STATUS_WAIT_SECONDS
        )
        [pending] = self.status(self.live)["pendingPermissions"]
        return str(pending["requestId"])

    def unchanged(self, recording: str, memory: str) -> None:
        """acme's state is as it left it: the permission request still open, the files whole."""
        status = self.status(self.live)
        assert [p["requestId"] for p in status["pendingPermissions"]] == [self.request_id]
        assert status["approvalMode"] == "default" and status["hasActivePrompt"]
        assert self.recording.read_text() == recording
        assert self.memory.read_text() == memory
        listed = self.http.get("/workspace/sessions").json()["sessions"]
        assert {s["sessionId"] for s in listed} == {self.live, self.recorded}


UNKNOWN = "00000000-0000-4000-8000-0000000000ff"  # an id no tenant has


def anonymous(answer: httpx.Response, acme: Acme) -> str:
    """An answer with every id of acme's (and :data:`UNKNOWN`) replaced by one placeholder."""
    text = answer.text
    for value in (acme.live, acme.recorded, acme.request_id, UNKNOWN):
        text = text.replace(value, "<id>")
    return text


def filled(path: str, acme: Acme, which: str) -> str:
    return path.replace("{id}", acme.live if which == "live" else acme.recorded).replace(
        "{request_id}", acme.request_id
    )


TENANT_NAMES = st.from_regex(TENANT_NAME, fullmatch=True).filter(lambda t: t != "acme")
BODIES = st.sampled_from([
    None, {}, {"prompt": "hi"}, {"mode": "yolo"}, {"modelId": "scripted-model"},
    {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    {"turn": 1, "scope": "both"}, {"sessionId": "00000000-0000-4000-8000-000000000000"},
])  # fmt: skip


async def test_no_route_and_no_tool_reaches_another_tenants_sessions_or_files(
    tenant_daemon: Callable[..., Served],
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
) -> None:
    """#24 "Done when": tenant isolation across every route and tool. Any other tenant, on any
    route the app serves, with any of acme's ids and any body, gets a 4xx that names nothing of
    acme's and changes nothing of acme's; any tool of its session, aimed at acme's recordings,
    memory or cairn's home, reads and changes nothing of acme's."""
    home = Path(cairn_env["CAIRN_HOME"])
    served = tenant_daemon()
    acme = Acme(served, home, project)
    recording, memory = acme.recording.read_text(), acme.memory.read_text()
    routes = daemon_routes(project)
    assert ("POST", "/session/{id}/prompt") in routes and len(routes) >= 18

    @settings(
        max_examples=120,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        route=st.sampled_from(routes),
        tenant=TENANT_NAMES,
        which=st.sampled_from(["live", "recorded"]),
        body=BODIES,
        headers=st.sampled_from(["other", "missing", "both"]),
    )
    def other_tenant_gets_nothing(
        route: tuple[str, str], tenant: str, which: str, body: Any, headers: str
    ) -> None:
        method, path = route
        sent = {"Authorization": f"Bearer {TOKEN}"}
        raw: list[tuple[str, str]] = list(sent.items())
        if headers == "other":
            raw.append((HEADER, tenant))
        elif headers == "both":  # acme's name and another's: never either
            raw += [(HEADER, "acme"), (HEADER, tenant)]

        def send(url_path: str) -> httpx.Response:
            return stranger_http.request(method, url_path, headers=raw, json=body)

        answer = send(filled(path, acme, which))
        text = answer.text
        assert SECRET not in text
        if headers == "both":
            assert (answer.status_code, answer.json()["code"]) == (400, "duplicate_header")
            return
        if route in OPERATOR_ROUTES:
            assert answer.status_code == 200
            assert acme.live not in text and acme.recorded not in text
            return
        if headers == "missing":
            assert (answer.status_code, answer.json()["code"]) == (400, "tenant_required")
            return
        if "{" in path:  # acme's ids answer exactly as ids nobody has
            unknown = path.replace("{id}", UNKNOWN).replace("{request_id}", UNKNOWN)
            stranger = send(unknown)
            assert 400 <= answer.status_code < 500
            assert (answer.status_code, anonymous(answer, acme)) == (
                stranger.status_code, anonymous(stranger, acme)
            )  # fmt: skip
            return
        assert acme.live not in text and acme.recorded not in text
        if path == "/session" and answer.status_code == 200:
            created = answer.json()
            assert created["attached"] is False and created["lastEventId"] <= 1
            gone = stranger_http.delete(
                f"/session/{created['sessionId']}",
                headers={"Authorization": f"Bearer {TOKEN}", HEADER: tenant},
            )
            assert gone.status_code == 204

    # One client for every example, with no headers of its own (each request carries its own):
    # a client per request cost ~50 ms of CPU each (its TLS context), ~200 of them a run.
    with httpx.Client(base_url=served.url, trust_env=False, timeout=30) as stranger_http:
        other_tenant_gets_nothing()
    acme.unchanged(recording, memory)

    async with client(served, "globex") as globex:
        spy = await DaemonSessionClient.create(globex, approval_mode="yolo")
        await spy.prompt_and_wait("which tools are there?")
        [first] = [
            r for r in scripted_server.requests_for("main") if r.session_id == spy.session_id
        ]
        attacks = tool_attacks(acme, first)
        unclassified = set(first.tool_names) - set(attacks) - set(NO_REACH_TOOLS)
        assert not unclassified, f"tools with no isolation attack: {sorted(unclassified)}"
        for name in sorted(attacks):
            if name in first.tool_names:
                for args in attacks[name]:
                    await spy.prompt_and_wait(attack(name, args))

    ran = [r for r in scripted_server.requests if r.session_id == spy.session_id]
    results = [m for r in ran for m in r.messages if m.get("role") == "tool"]
    assert len(results) >= sum(len(a) for n, a in attacks.items() if n in first.tool_names)
    for request in ran:
        assert not request.contains(SECRET), request.messages[-1]
    acme.unchanged(recording, memory)
    acme.http.close()


def tool_attacks(acme: Acme, request: RecordedRequest) -> dict[str, list[dict[str, Any]]]:
    """For each tool that reaches files, addresses or sessions: calls aimed at acme's."""
    rec, mem, home = str(acme.recording), str(acme.memory), str(acme.home)
    shell = f"cat {rec} {mem}; grep -rs {SECRET_PATTERN} {home}; ls -R {home}"
    [agent] = [t for t in request.tools if t["function"]["name"] == "agent"] or [None]
    kinds = agent["function"]["parameters"]["properties"]["subagent_type"]["enum"] if agent else []
    sessions = f"{acme.served.url}/workspace/sessions"
    return {
        "read_file": [{"file_path": rec}, {"file_path": mem}],
        "list_directory": [{"path": str(acme.recording.parent)}, {"path": home}],
        "glob": [{"pattern": "**/*.jsonl", "path": home}, {"pattern": f"../**/{acme.recorded}*"}],
        "grep_search": [{"pattern": SECRET_PATTERN, "path": home}],
        "edit": [{"file_path": rec, "old_string": "sessionId", "new_string": "stolen"}],
        "write_file": [{"file_path": mem, "content": "overwritten"}],
        "run_shell_command": [{"command": shell}],
        "web_fetch": [{"url": f"file://{rec}", "prompt": "x"}, {"url": sessions, "prompt": "x"}],
        "agent": [
            {
                "description": "look",
                "prompt": attack("run_shell_command", {"command": shell}),
                "subagent_type": kind,
            }
            for kind in kinds[:1]
        ],
    }
