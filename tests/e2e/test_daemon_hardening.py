"""``cairn serve`` attacked as a local process or a hostile client would (#24): real daemons,
real HTTP, real programs.

The tests that attack a daemon serving tenants with the usual flags share one (:func:`tenants`):
each uses tenants of its own. The others start their own daemon: they give it flags or an
environment of their own, or read what it wrote once stopped."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import ScriptedServer, reply, tool_call
from cairn.testing.fixtures import isolated_env

from ..entry_point import run_main
from ..mcp.helpers import patient_discovery, tools_server
from .conftest import CAIRN, write_settings
from .test_daemon import Served, cleared, launch, reap, shared_model, until
from .test_daemon import serve as serve_fixture

serve = serve_fixture  # the fixture, under the name the tests ask for
__all__ = ["shared_model"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TOKEN = "hardening-token"
HEADER = "X-Cairn-Tenant"


@pytest.fixture
def scripted_server(shared_model: ScriptedServer) -> ScriptedServer:
    """The model of every daemon of the module, :func:`cleared` for the test: the daemons of a
    test before are stopped, and no turn of the shared one outlives its test (each waits for its
    turns), so no request of another test reaches it."""
    return cleared(shared_model)


@pytest.fixture(scope="module")
def shared_tenants(
    shared_model: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One ``cairn serve --token TOKEN --tenant-header HEADER`` for the module, with patient MCP
    discovery (a test's MCP servers are all asked before its first request). Sharing is sound:
    tenants never see each other's sessions (what these tests attack), and each test uses
    tenant names no other test uses."""
    root = tmp_path_factory.mktemp("tenants")
    env = isolated_env(shared_model.base_url, root)
    patient_discovery(Path(env["CAIRN_HOME"]))
    project = root / "project"  # as the project fixture makes it
    (project / ".git").mkdir(parents=True)
    write_settings(project, {"memory": {"enableManagedAutoMemory": False}})
    served = launch(["--token", TOKEN, "--tenant-header", HEADER], cwd=project, env=env)
    yield served
    reap([served])


@pytest.fixture
def tenants(shared_tenants: Served, scripted_server: ScriptedServer) -> Served:
    """The module's tenant daemon, answering from this test's ``scripted_server``."""
    assert shared_tenants.process.poll() is None, "the shared tenant daemon has exited"
    return shared_tenants


def planted_server(marker: Path) -> dict[str, object]:
    """A client's stdio MCP server whose command proves it ran by creating ``marker``."""
    script = f"open({str(marker)!r}, 'w').close()"
    return {"name": "planted", "command": sys.executable, "args": ["-c", script], "env": []}


async def ran_a_turn(
    url: str, token: str | None = None, headers: dict[str, str] | None = None
) -> None:
    """A whole turn on a clean session: time for a refused server to have run, had it started."""
    async with DaemonClient(url, token, headers=headers) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt_and_wait("hello")


async def test_a_daemon_without_a_token_starts_no_program_a_client_names_in_mcp_servers(
    serve: object, scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    """#24 High: "a daemon without a token starts any program": ``POST /session`` or
    ``/session/{id}/load`` with ``mcpServers`` ran the command for any local process."""
    served = serve()  # type: ignore[operator]
    marker = tmp_path / "pwned"
    servers = [planted_server(marker)]
    async with httpx.AsyncClient(base_url=served.url, trust_env=False, timeout=30) as http:
        created = await http.post("/session", json={"mcpServers": servers})
        recorded = (await http.post("/session", json={})).json()["sessionId"]
        await http.post(f"/session/{recorded}/prompt", json={"prompt": "record me"})
        await http.delete(f"/session/{recorded}")
        loaded = await http.post(f"/session/{recorded}/load", json={"mcpServers": servers})
        remote = await http.post(
            "/session", json={"mcpServers": [{"type": "http", "name": "web", "url": served.url}]}
        )
    await ran_a_turn(served.url)

    for answer in (created, loaded):
        assert (answer.status_code, answer.json()["code"]) == (401, "token_required")
        assert "planted" in answer.json()["error"]
        assert "--token" in answer.json()["error"]
    assert remote.status_code == 200  # a URL runs nothing on this machine
    assert not marker.exists()


async def test_a_tenant_daemon_refuses_client_stdio_servers_even_with_the_token(
    tenants: Served, tmp_path: Path
) -> None:
    """#24 High: client-passed stdio servers are refused in tenant mode (a tenant's program
    would run outside the sandbox, with the daemon's rights over every tenant's files)."""
    served = tenants
    marker = tmp_path / "pwned"
    headers = {"Authorization": f"Bearer {TOKEN}", HEADER: "acme"}
    async with httpx.AsyncClient(
        base_url=served.url, trust_env=False, timeout=30, headers=headers
    ) as http:
        created = await http.post("/session", json={"mcpServers": [planted_server(marker)]})
    await ran_a_turn(served.url, TOKEN, {HEADER: "acme"})

    assert (created.status_code, created.json()["code"]) == (403, "stdio_servers_refused")
    assert "tenant" in created.json()["error"]
    assert not marker.exists()


def raw_request(url: str, lines: list[str], body: bytes = b"") -> tuple[int, dict[str, object]]:
    """Send a request line and headers exactly as given (repeated ones too); the status and
    JSON body of the answer."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    head = "\r\n".join([*lines, f"Content-Length: {len(body)}", "Connection: close", "", ""])
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(head.encode("latin-1") + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(payload or b"{}")


@pytest.mark.parametrize("repeated", ["X-Cairn-Tenant", "Host", "Authorization"])
async def test_a_request_repeating_the_tenant_host_or_authorization_header_is_refused(
    tenants: Served, repeated: str
) -> None:
    """#24 Medium: "duplicate X-Cairn-Tenant headers are accepted (the middleware takes the
    last, routes the first)": a check and a route must never read different copies."""
    served = tenants
    acme, globex = (f"{name}-{repeated.lower()}" for name in ("acme", "globex"))  # the test's own
    host = urlsplit(served.url).netloc
    single = {"Host": host, "Authorization": f"Bearer {TOKEN}", HEADER: acme}
    copies = {"Host": "evil.example:80", "Authorization": "Bearer wrong", HEADER: globex}
    lines = ["POST /session HTTP/1.1", *(f"{k}: {v}" for k, v in single.items())]
    lines.append(f"{repeated}: {copies[repeated]}")
    body = b"{}"

    status, answer = raw_request(served.url, [*lines, "Content-Type: application/json"], body)
    plain, created = raw_request(
        served.url,
        ["POST /session HTTP/1.1", *(f"{k}: {v}" for k, v in single.items())],
        body,
    )

    code = "bad_request" if repeated == "Host" else "duplicate_header"  # h11 refuses Host
    assert (status, answer.get("code")) == (400, code), answer
    assert repeated.lower() in str(answer["error"]).lower()
    assert plain == 200 and "sessionId" in created
    async with DaemonClient(served.url, TOKEN, headers={HEADER: globex}) as on_globex:
        assert await on_globex.list_sessions() == []  # nothing was created for either copy
    async with DaemonClient(served.url, TOKEN, headers={HEADER: acme}) as on_acme:
        assert [s["sessionId"] for s in await on_acme.list_sessions()] == [created["sessionId"]]


async def test_a_token_passed_by_flag_is_not_in_a_commands_environment_under_another_name(
    serve: object, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    """#24 follow-up: ``cairn serve --token "$X"`` left the token visible to shell commands in
    the variable ``X`` when the sandbox is off: it was removed by name (``CAIRN_SERVER_TOKEN``),
    not by value."""
    token = "flag-token-5f3a9c1e"
    env = {**cairn_env, "DEPLOY_TOKEN": token, "WRAPPED": f"Bearer {token}", "HARMLESS": "kept"}
    served = serve("--token", token, env=env)  # type: ignore[operator]
    scripted_server.enqueue(tool_call("run_shell_command", {"command": "env"}), purpose="main")
    scripted_server.enqueue(reply("listed"), purpose="main")

    async with DaemonClient(served.url, token) as client:
        session = await DaemonSessionClient.create(client, approval_mode="yolo")
        assert await session.prompt_and_wait("list the environment") == "listed"

    listed = scripted_server.requests_for("main")[-1].messages[-1]
    assert listed["role"] == "tool" and "HARMLESS=kept" in listed["content"]
    assert token not in listed["content"]
    assert "DEPLOY_TOKEN" not in listed["content"] and "WRAPPED" not in listed["content"]


def stderr_after_stop(served: object) -> str:
    """What a daemon wrote to stderr, once it is stopped."""
    process = served.process  # type: ignore[attr-defined]
    process.terminate()
    process.wait(30)
    return str(process.stderr.read())


async def test_a_token_given_by_value_on_the_command_line_is_warned_about(
    serve: object, cairn_env: dict[str, str]
) -> None:
    """#24 follow-up: ``cairn serve --token "$X"`` shows the token to every local user in the
    process list (``ps``, ``/proc/<pid>/cmdline``), and nothing said so."""
    for flags in (("--token", TOKEN), (f"--token={TOKEN}",)):
        served = serve(*flags)  # type: ignore[operator]
        async with DaemonClient(served.url, TOKEN) as client:
            assert await client.list_sessions() == []
        said = stderr_after_stop(served)
        assert "--token shows the token" in said and "--token-file" in said
        assert TOKEN not in said  # the warning does not print it once more

    served = serve(env={**cairn_env, "CAIRN_SERVER_TOKEN": TOKEN})  # type: ignore[operator]
    async with DaemonClient(served.url, TOKEN) as client:
        assert await client.list_sessions() == []
    assert "--token shows" not in stderr_after_stop(served)


async def test_the_token_is_read_from_a_file_given_by_token_file_or_its_variable(
    serve: object, cairn_env: dict[str, str], tmp_path: Path
) -> None:
    """#24 follow-up: ``--token-file`` (or ``CAIRN_SERVER_TOKEN_FILE``) keeps the token out of
    the process list; the file's final newline is not part of it."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    by_flag = serve("--token-file", str(token_file))  # type: ignore[operator]
    by_variable = serve(env={**cairn_env, "CAIRN_SERVER_TOKEN_FILE": str(token_file)})  # type: ignore[operator]
    for served in (by_flag, by_variable):
        async with httpx.AsyncClient(base_url=served.url, trust_env=False, timeout=30) as http:
            assert (await http.get("/sessions")).status_code == 401
        async with DaemonClient(served.url, TOKEN) as client:
            assert await client.list_sessions() == []
        said = stderr_after_stop(served)
        assert "--token shows" not in said and TOKEN not in said


@pytest.mark.parametrize(
    ("content", "flags", "message"),
    [
        (None, (), "cannot read the token file"),
        ("\n  \n", (), "is empty"),
        (TOKEN, ("--token", TOKEN), "not both"),
    ],
)
def test_an_unusable_token_file_is_a_clear_error(
    cairn_env: dict[str, str],
    project: Path,
    tmp_path: Path,
    content: str | None,
    flags: tuple[str, ...],
    message: str,
) -> None:
    """#24 follow-up: a token file that is missing, empty or given with ``--token`` stops the
    daemon before it listens, with exit code 42 and the reason. The missing file runs ``cairn
    serve`` as a process, the others through its entry point in this process."""
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    args = ["serve", "--port", "0", "--token-file", str(token_file), *flags]
    if content is None:
        finished = subprocess.run([*CAIRN, *args], cwd=project, env=cairn_env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=60)  # fmt: skip
    else:
        finished = run_main(args, cwd=project, env=cairn_env)
    assert finished.returncode == 42, finished
    assert message in finished.stderr and "listening" not in finished.stdout
    assert "Traceback" not in finished.stderr


class CountingListener:
    """A loopback TCP port that counts the connections made to it and closes each at once."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.port = self._socket.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._socket.close()


async def test_a_tenants_http_mcp_servers_do_not_reach_loopback_or_private_addresses(
    tenants: Served, scripted_server: ScriptedServer
) -> None:
    """#24 follow-up: a tenant passing ``mcpServers`` with an HTTP or SSE URL on loopback (or a
    private, link-local or metadata address) had the daemon connect there for it: a request
    forgery reaching the services of the daemon's machine that no tenant may reach. The URL's
    host is checked as it is connected to (web_fetch's address policy, every IPv6 form)."""
    served = tenants  # with patient discovery
    listener = CountingListener()
    port = listener.port
    urls = {
        "ip": ("http", f"http://127.0.0.1:{port}/mcp"),
        "name": ("http", f"http://localhost:{port}/mcp"),
        "mapped": ("http", f"http://[::ffff:127.0.0.1]:{port}/mcp"),
        "events": ("sse", f"http://127.0.0.1:{port}/sse"),
    }
    servers = [
        {"type": kind, "name": name, "url": url, "headers": []}
        for name, (kind, url) in urls.items()
    ]
    try:
        async with DaemonClient(served.url, TOKEN, headers={HEADER: "initech"}) as client:
            session = await DaemonSessionClient.create(client, mcp_servers=servers)
            assert await session.prompt_and_wait("hello") == "ok"
            replay = DaemonSessionClient(client, session.session_id, last_event_id=0)
            said = json.dumps([e.raw for e in await until(replay, "turn_complete")])
    finally:
        listener.close()

    assert listener.accepted == 0
    for name in urls:  # the tenant is told why each server is missing
        assert f"MCP server {name}: " in said
    assert said.count("is refused: it is a private or local address") == len(urls)
    turn = scripted_server.requests_for("main")[-1]  # not a checkpoint's request after it
    assert not [n for n in turn.tool_names if n.startswith("mcp__")]


async def test_the_operator_lets_tenants_reach_private_mcp_servers_with_a_flag(
    serve: object, scripted_server: ScriptedServer, cairn_env: dict[str, str], tmp_path: Path
) -> None:
    """#24 follow-up: ``cairn serve --allow-private-mcp`` keeps a tenant's loopback MCP server
    reachable (a deployment whose MCP services are on its own network)."""
    patient_discovery(Path(cairn_env["CAIRN_HOME"]))
    served = serve("--token", TOKEN, "--tenant-header", HEADER, "--allow-private-mcp")  # type: ignore[operator]
    with tools_server(tmp_path).serve_http() as running:
        servers = [{"name": "web", **running.acp_config}]
        async with DaemonClient(served.url, TOKEN, headers={HEADER: "acme"}) as client:
            session = await DaemonSessionClient.create(client, mcp_servers=servers)
            assert await session.prompt_and_wait("hello") == "ok"

    turn = scripted_server.requests_for("main")[-1]  # not a checkpoint's request after it
    assert "mcp__web__echo" in turn.tool_names


@pytest.mark.parametrize(
    "database",
    [
        "postgresql://cairn:pw-5e1b9@127.0.0.1:1/sessions",
        "postgresql://127.0.0.1:1/sessions?password=pw-5e1b9",
        "host=127.0.0.1 port=1 dbname=sessions password=pw-5e1b9",
    ],
)
def test_a_database_password_given_by_value_on_the_command_line_is_warned_about(
    cairn_env: dict[str, str], project: Path, database: str
) -> None:
    """#24 follow-up: ``cairn serve --database postgresql://u:PASSWORD@...`` shows the password
    of every tenant's sessions to every local user in the process list, and nothing said so."""
    finished = subprocess.run(
        [*CAIRN, "serve", "--port", "0", "--database", database],
        cwd=project,
        env=cairn_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )  # no database listens on port 1: the daemon stops after the warning

    assert "--database shows the database's password" in finished.stderr
    assert "CAIRN_DATABASE_URL" in finished.stderr
    assert "pw-5e1b9" not in finished.stderr

    by_variable = subprocess.run(
        [*CAIRN, "serve", "--port", "0"],
        cwd=project,
        env={**cairn_env, "CAIRN_DATABASE_URL": database},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--database shows" not in by_variable.stderr
