"""Running the daemon: uvicorn on a socket we bind, a fast start, and a graceful shutdown.

:class:`DaemonServer` serves a runtime's sessions inside the running event loop (the CLI, tests
and benchmarks use it alike). ``cairn serve`` validates its flags and settings, listens, and only
then imports the session runtime in a worker thread, so ``/health`` answers within the time it
takes to import uvicorn. On shutdown every live session is closed first (its running turn
cancelled, its pending permission requests resolved as cancelled, its recording flushed, its
event streams ended with ``session_closed``), then uvicorn stops and the runtime closes, giving
the memory work of the last turns a bounded wait (:meth:`Runtime.aclose`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h11

from cairn.daemon.app import BootApp
from cairn.daemon.config import SHUTDOWN_GRACE_SECONDS, DaemonConfig, DaemonConfigError
from cairn.daemon.errors import error_body, json_bytes
from cairn.daemon.security import SecurityMiddleware
from cairn.daemon.uvicorn_parts import Config, H11Protocol, Server
from cairn.debug_log import get_logger, mirror_warnings
from cairn.exit_codes import ExitCode
from cairn.session.startup import Startup, StartupError, load_startup

if TYPE_CHECKING:
    from cairn.daemon.replicas import ReplicaRegistry
    from cairn.daemon.routes import DaemonRoutes
    from cairn.daemon.sessions import SessionRegistry
    from cairn.session.runtime import Runtime

__all__ = ["DaemonServer", "run_daemon"]

STARTUP_POLL_SECONDS = 0.002  # how often start() checks that uvicorn is listening
DATE_REFRESH_SECONDS = 1.0  # uvicorn's Date header is refreshed at least this often
BACKLOG = 2048  # pending connections the listening socket queues (uvicorn's default)
# Model connection pools the sessions are spread over: one pool's bookkeeping grows with its
# connections, and 16 measured best for 50 concurrent sessions (benchmarks/README.md).
CONNECTION_POOLS = 16
_log = get_logger("DAEMON")


class JsonErrorsH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, answering a request it cannot even parse (a malformed
    ``Content-Length``, a bad request line) in the daemon's JSON error shape, not plain text."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._malformed: h11.RemoteProtocolError | None = None
        next_event = self.conn.next_event

        def remember() -> Any:  # h11's reason is dropped by uvicorn: keep it for the answer
            try:
                return next_event()
            except h11.RemoteProtocolError as exc:
                self._malformed = exc
                raise

        self.conn.next_event = remember  # type: ignore[method-assign]

    def send_400_response(self, msg: str) -> None:
        detail = str(self._malformed) if self._malformed is not None else msg
        code = "invalid_content_length" if "content-length" in detail.lower() else "bad_request"
        body = json_bytes(error_body(f"Malformed HTTP request: {detail}", code))
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()


class _Server(Server):
    """uvicorn without its signal handling (the daemon owns SIGINT and SIGTERM), woken by
    :meth:`exit` instead of polling ``should_exit`` every 100 ms."""

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._wake = asyncio.Event()

    def exit(self) -> None:
        self.should_exit = True
        self._wake.set()

    async def main_loop(self) -> None:
        while not await self.on_tick(0):  # counter 0: refresh the Date header on every tick
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DATE_REFRESH_SECONDS):
                    await self._wake.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        return None


class DaemonServer:
    """The daemon in the running event loop.

    With a ``runtime`` the routes are ready before :meth:`start` listens. Without one,
    :meth:`start` listens at once (``/health`` answers) and :meth:`load` builds the runtime and
    the routes in a worker thread while other requests wait.
    """

    def __init__(self, runtime: Runtime | None, config: DaemonConfig) -> None:
        self.runtime = runtime
        self.config = config
        self.registry: SessionRegistry | ReplicaRegistry | None = None
        self.routes: DaemonRoutes | None = None
        self._boot = BootApp(config)
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._port: int | None = None
        self._warming: asyncio.Future[None] | None = None

    @property
    def base_url(self) -> str:
        host = self.config.host.strip("[]")
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the daemon is not listening yet")
        return self._port

    async def start(self) -> str:
        """Bind, start serving and return the base URL (``OSError`` if the port is taken)."""
        runtime = self.runtime
        sock = _bind(self.config.host, self.config.port)
        self._port = sock.getsockname()[1]
        if runtime is not None:
            try:
                await self._attach(*_build_routes(lambda: runtime, self.config))
            except BaseException:
                sock.close()
                raise
        server = _Server(
            Config(
                SecurityMiddleware(self._boot, self.config),
                lifespan="off",
                http=JsonErrorsH11Protocol,
                ws="none",
                log_config=None,
                access_log=False,
                server_header=False,
                proxy_headers=False,
                timeout_graceful_shutdown=int(SHUTDOWN_GRACE_SECONDS),
            )
        )
        self._server = server
        self._task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():
                self._task.result()  # re-raise why it stopped
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(STARTUP_POLL_SECONDS)
        return self.base_url

    async def load(self, make_runtime: Callable[[], Runtime]) -> None:
        """Build the runtime and the routes off the event loop; requests wait until then."""
        try:
            built = await asyncio.to_thread(_build_routes, make_runtime, self.config)
            await self._attach(*built)
        except Exception as exc:
            self._boot.failed(str(exc))
            raise

    async def _attach(
        self,
        runtime: Runtime,
        registry: SessionRegistry | ReplicaRegistry,
        routes: DaemonRoutes,
        app: Any,
    ) -> None:
        self.runtime, self.registry, self.routes = runtime, registry, routes
        if registry.replicated:  # --database: this replica in the database, before traffic
            await registry.start(self.base_url)  # type: ignore[union-attr]
        self._boot.ready(app)
        from cairn.session.warmup import warm_up

        # Right after it is ready: what the first request of each kind would load on use.
        self._warming = asyncio.ensure_future(asyncio.to_thread(warm_up, runtime))

    async def warmed(self) -> None:
        """Until the warm-up after :meth:`load` (if any) has ended."""
        if self._warming is not None:
            await asyncio.wait({self._warming})

    async def wait(self) -> None:
        """Until the HTTP server stops by itself (it normally runs until :meth:`stop`)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self, reason: str = "daemon_shutdown") -> None:
        await self.warmed()  # a worker thread: it cannot be stopped, and it is short
        if self.registry is not None:
            await self.registry.close_all(reason)
        else:
            self._boot.failed("the daemon is shutting down")
        if self.routes is not None:
            await self.routes.aclose()
        if self._server is not None:
            self._server.exit()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._task


def _build_routes(
    make_runtime: Callable[[], Runtime], config: DaemonConfig
) -> tuple[Runtime, SessionRegistry | ReplicaRegistry, DaemonRoutes, Any]:
    """Import the session runtime and build the routes (run in a worker thread at start-up);
    with ``--database`` the sessions live in it (psycopg is imported only then)."""
    from cairn.daemon.app import create_routes_app
    from cairn.daemon.routes import DaemonRoutes

    runtime = make_runtime()
    # Given by flag, they are in no variable cairn removes by name: `--token "$X"` leaves X.
    runtime.hide_from_commands(config.token, config.database)
    registry: SessionRegistry | ReplicaRegistry
    if config.database is not None:
        from cairn.daemon.replicas import ReplicaRegistry
        from cairn.database.connection import Database

        registry = ReplicaRegistry(runtime, config, Database(config.database))
        runtime.use_session_stores(registry.sessions)
    else:
        from cairn.daemon.sessions import SessionRegistry

        registry = SessionRegistry(runtime, config)
    routes = DaemonRoutes(registry, config)
    return runtime, registry, routes, create_routes_app(routes)


def _bind(host: str, port: int) -> socket.socket:
    name = host.strip("[]")
    infos = socket.getaddrinfo(
        name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )
    family, kind, proto, _, address = infos[0]
    # proto must be IPPROTO_TCP: asyncio only sets TCP_NODELAY on such sockets, and without it
    # Nagle's algorithm holds each small response write back until the client's delayed ACK.
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def run_daemon(
    *,
    host: str,
    port: int,
    token: str | None,
    allow_origins: Sequence[str],
    max_sessions: int,
    workspace: Path,
    tenant_header: str | None = None,
    allow_private_mcp: bool = False,
    database: str | None = None,
    replica_id: str | None = None,
    advertise_url: str | None = None,
    workspace_root: Path | None = None,
    lease_seconds: float | None = None,
    drain_seconds: float | None = None,
) -> int:
    """``cairn serve``: serve until SIGINT or SIGTERM, then shut down gracefully."""
    replica: dict[str, Any] = {}
    if lease_seconds is not None:
        replica["lease_seconds"] = lease_seconds
    if drain_seconds is not None:
        replica["drain_seconds"] = drain_seconds
    config = DaemonConfig(
        workspace=workspace.resolve(),
        host=host,
        port=port,
        token=token,
        allow_origins=tuple(allow_origins),
        max_sessions=max_sessions,
        tenant_header=tenant_header,
        allow_private_mcp=allow_private_mcp,
        database=database,
        replica_id=replica_id,
        advertise_url=advertise_url,
        workspace_root=workspace_root.resolve() if workspace_root is not None else None,
        **replica,
    )
    try:
        config.validate(replica_flags=tuple(f"--{k.replace('_', '-')}" for k in replica))
    except DaemonConfigError as exc:
        sys.stderr.write(f"cairn serve: {exc}\n")
        return ExitCode.BAD_INPUT
    return asyncio.run(_serve(config))


async def _serve(config: DaemonConfig) -> int:
    try:  # before listening: a bad setup exits with its code, never a half-started daemon
        startup = load_startup(config.workspace)
    except StartupError as exc:
        sys.stderr.write(f"cairn serve: {exc}\n")
        return exc.exit_code
    for warning in startup.warnings:
        sys.stderr.write(f"cairn serve: warning: {warning}\n")
    if config.tenant_header is not None:
        from cairn.session.tenancy import tenancy_problems

        problems = tenancy_problems(startup.settings, config.workspace)
        if problems:
            lines = "".join(f"\n  - {p}" for p in problems)
            sys.stderr.write(
                "cairn serve: refusing to serve tenants that could reach each other's "
                f"files:{lines}\n"
            )
            return ExitCode.BAD_INPUT
    mirror_warnings(sys.stderr, "cairn serve: ")  # the operator's log: warnings of every session
    try:
        return await _serve_until_stopped(config, startup)
    finally:
        mirror_warnings(None)


async def _serve_until_stopped(config: DaemonConfig, startup: Startup) -> int:
    stop = _stop_on_signals()
    server = DaemonServer(None, config)
    try:
        base_url = await server.start()
    except OSError as exc:
        sys.stderr.write(f"cairn serve: cannot listen on {config.host}:{config.port}: {exc}\n")
        return ExitCode.ERROR
    try:
        await server.load(lambda: startup.open_runtime(connection_pools=CONNECTION_POOLS))
    except Exception as exc:
        sys.stderr.write(f"cairn serve: cannot start the session runtime: {exc}\n")
        await server.stop()
        return ExitCode.ERROR
    _announce(base_url, config)
    try:
        await _until_stopped(server, stop)
        await server.stop()
        return ExitCode.OK
    finally:
        if server.runtime is not None:
            await server.runtime.aclose(memory_wait=SHUTDOWN_GRACE_SECONDS)


def _announce(base_url: str, config: DaemonConfig) -> None:
    """The first stdout line is the URL (scripts and tests read it when --port is 0)."""
    sys.stdout.write(f"cairn serve: listening on {base_url} (workspace {config.workspace})\n")
    sys.stdout.flush()
    if config.token is None:
        sys.stderr.write(
            "cairn serve: no token set; routes that change permissions and stdio MCP servers "
            "from clients are disabled (set --token or CAIRN_SERVER_TOKEN to enable them)\n"
        )


def _stop_on_signals() -> asyncio.Event:
    """SIGINT/SIGTERM set the returned event (a graceful shutdown); a second one exits at once."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            os._exit(ExitCode.ERROR)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    return stop


async def _until_stopped(server: DaemonServer, stop: asyncio.Event) -> None:
    """Until a signal asks to stop, or the HTTP server ends by itself."""
    stopped = asyncio.ensure_future(stop.wait())
    serving = asyncio.ensure_future(server.wait())
    await asyncio.wait({stopped, serving}, return_when=asyncio.FIRST_COMPLETED)
    for task in (stopped, serving):
        task.cancel()
    _log.info("shutting down")
