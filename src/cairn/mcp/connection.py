"""One MCP server connection: start, discover, call, notice a crash, restart, close.

The SDK's transports and ``ClientSession`` are anyio context managers that must be entered and
left by one task, so each connection runs an owner task that opens them, discovers the server's
tools, prompts and resources, then waits until it is closed or the server goes away. Calls come
from any task and go through the session's streams.

Nothing here raises into a turn for a server's misbehaviour: a failed start or a crash is a
status with a reason, and a call on a broken server is an :class:`McpCallError` the tool turns
into an error result for the model.

The MCP SDK costs 0.4-0.9 s to import (its package imports its servers too; by its parts, as
:mod:`cairn.mcp.sdk_imports` imports it, about half). A connection is made without it; its owner
task loads it in a worker thread (:func:`load_sdk`) before it starts the server, so a session's
first model request, which waits only a short grace for its servers, never waits for the import.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from cairn._version import __version__
from cairn.abort import wait_until_set
from cairn.debug_log import get_logger
from cairn.llm import untrusted_advice, verifying_context
from cairn.mcp.config import ProxySettings, ServerConfig
from cairn.mcp.sdk_imports import import_by_parts

if TYPE_CHECKING:
    import anyio
    import httpx
    import mcp.types as types
    from mcp.client.session import ClientSession
    from mcp.shared.exceptions import McpError
    from pydantic import AnyUrl, ValidationError

    from cairn.mcp.stdio import CLOSE_GRACE_SECONDS, MALFORMED_RESPONSE, StdioProcess, open_stdio

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "MAX_RESTARTS",
    "ConnectionStatus",
    "McpCallError",
    "McpConnection",
    "ServerStatus",
    "load_sdk",
]

CONNECT_TIMEOUT_SECONDS = 30.0  # start + initialize + first listings; longer is a failed start
REFRESH_WAIT_SECONDS = 5.0  # a call whose server announced new lists waits this long for them
MAX_RESTARTS = 3  # restarts of a crashed server in one connection's life (a session)
ConnectionStatus: TypeAlias = Literal["connecting", "connected", "failed", "disabled", "closed"]
_log = get_logger("MCP")
_sdk_lock = threading.Lock()
_sdk_loaded = False


def load_sdk() -> None:
    """Import the MCP SDK (and the stdio transport) into this module, once; safe from any
    thread. Every use of the SDK below runs after it: a connection's owner task calls it first,
    and a call waits for that task's start."""
    global anyio, httpx, types, ClientSession, McpError, AnyUrl, ValidationError
    global CLOSE_GRACE_SECONDS, MALFORMED_RESPONSE, StdioProcess, open_stdio, _sdk_loaded
    with _sdk_lock:
        if _sdk_loaded:
            return
        import_by_parts()  # not the package's servers and FastMCP: ~0.5 s of CPU
        import anyio
        import httpx
        import mcp.types as types
        from mcp.client.session import ClientSession
        from mcp.shared.exceptions import McpError
        from pydantic import AnyUrl, ValidationError

        from cairn.mcp.stdio import (
            CLOSE_GRACE_SECONDS,
            MALFORMED_RESPONSE,
            StdioProcess,
            open_stdio,
        )

        _sdk_loaded = True


class McpCallError(Exception):
    """A request to a server failed; the message is what the model (and the user) is told."""


class _BadStart(Exception):
    """The server's answer to a start-up request (initialize, a listing) is malformed or an
    error; the message says which and why."""


@dataclass(frozen=True)
class ServerStatus:
    """A snapshot for ``cairn mcp list`` and ``/mcp``."""

    name: str
    transport: str
    status: ConnectionStatus
    target: str
    scope: str
    tools: int
    prompts: int
    resources: int
    error: str | None
    pid: int | None
    restarts: int
    description: str | None


class McpConnection:
    def __init__(
        self,
        config: ServerConfig,
        *,
        cwd: Path,
        environ: Mapping[str, str] | None = None,
        on_change: Callable[[], None] | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
        proxy_settings: ProxySettings | None = None,
    ) -> None:
        """``environ``: what a stdio server starts with before its own ``env`` (default:
        cairn's environment without its secrets, as for shell commands). ``proxy_settings``:
        the ``proxy`` setting and the settings' ``env``, read with the process's environment
        for an HTTP or SSE server's proxy (:mod:`cairn.mcp.http`)."""
        self.config = config
        self._proxy_settings = proxy_settings
        self.name = config.name
        self._cwd = cwd
        self._environ = environ
        self._on_change = on_change
        self._connect_timeout = connect_timeout
        self.status: ConnectionStatus = "disabled" if config.disabled else "connecting"
        self.error: str | None = config.disabled_reason if config.disabled else None
        self.tools: list[types.Tool] = []
        self.prompts: list[types.Prompt] = []
        self.resources: list[types.Resource] = []
        self.resource_templates: list[types.ResourceTemplate] = []
        self.instructions: str | None = None
        self.restarts = 0
        self.generation = 0  # bumped whenever what the server offers changes
        self.connected_at: float | None = None
        self._session: ClientSession | None = None
        self._process: StdioProcess | None = None
        self._runner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._dead = asyncio.Event()
        self._crashed = False  # it was connected and went away: restartable on next use
        self._background: set[asyncio.Task[Any]] = set()
        self._refreshing: asyncio.Future[Any] | None = None
        self._refresh_again = False  # a list changed while the running refresh was listing
        self._restart_lock = asyncio.Lock()
        if config.disabled:
            self._ready.set()

    # ----- lifecycle -----

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def restartable(self) -> bool:
        """It crashed after connecting and has restarts left: the next call restarts it."""
        return self._crashed and self.restarts < MAX_RESTARTS

    @property
    def settled(self) -> bool:
        """Connected, failed, disabled or closed: no longer on its way up."""
        return self._ready.is_set()

    def start(self) -> None:
        """Connect in the background (idempotent while running)."""
        if self.config.disabled or (self._runner is not None and not self._runner.done()):
            return
        self._ready.clear()
        self._stop.clear()
        self._dead.clear()
        self.status = "connecting"
        self._runner = asyncio.create_task(self._run(), name=f"mcp:{self.name}")

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the connection settles; False if it is still connecting at ``timeout``."""
        return await wait_until_set(self._ready, timeout)

    async def aclose(self) -> None:
        """Close the session and stop the server (stdio: stdin, SIGTERM, SIGKILL)."""
        self._stop.set()
        runner = self._runner
        if runner is not None and not runner.done():
            if self.status == "connecting":
                runner.cancel()  # a server hanging in initialize must not hold up the exit
            try:
                async with asyncio.timeout(10):
                    await asyncio.shield(runner)
            except (TimeoutError, asyncio.CancelledError):
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.status != "disabled":
            self.status = "closed"
        self._ready.set()

    async def _run(self) -> None:
        try:
            await asyncio.to_thread(load_sdk)  # off the event loop: turns go on meanwhile
        except Exception as exc:  # an SDK that cannot be imported: a failed start, said so
            self.status, self.error = "failed", f"the MCP SDK could not be loaded: {exc}"
            self._ready.set()
            self._changed()
            return
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack)
                with anyio.fail_after(self._connect_timeout):
                    result = await _answer(session.initialize(), "initialize")
                    self.instructions = result.instructions
                    await self._discover(session, result.capabilities)
                self._session = session
                self.status, self.error = "connected", None
                self.connected_at = time.monotonic()
                self._crashed = False
                self._changed()
                self._ready.set()
                _log.info(f"MCP server {self.name}: connected, {len(self.tools)} tools")
                await self._until_gone()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an ExceptionGroup from a transport's task group too
            self._failed(exc)
        finally:
            self._session = None
            self._ready.set()
        if not self._stop.is_set() and self.status == "connected":
            self._crashed = True
            self.status = "failed"
            self.error = self._exit_reason() + "; it is restarted on its next use"
            _log.warning(f"MCP server {self.name}: {self.error}")
            self._changed()

    async def _open(self, stack: AsyncExitStack) -> ClientSession:
        config = self.config
        if config.transport == "stdio":
            assert config.command is not None
            cwd = Path(config.cwd).expanduser() if config.cwd else self._cwd
            if not cwd.is_absolute():
                cwd = self._cwd / cwd
            if self._environ is None:
                from cairn.tools.environment import command_environment

                self._environ = command_environment()
            read, write, process = await stack.enter_async_context(
                open_stdio(
                    config.command,
                    config.args,
                    environ=self._environ,
                    env=config.env,
                    cwd=cwd,
                    name=self.name,
                )
            )
            self._process = process
        elif config.transport == "http":
            from mcp.client.streamable_http import streamable_http_client

            assert config.url is not None
            tls = await self._trusted_context()
            client = await stack.enter_async_context(
                self._http_client(tls, dict(config.headers), None, None)
            )
            read, write, _ = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client)
            )
        else:
            from mcp.client.sse import sse_client

            from cairn.mcp.http import HTTP_TIMEOUT_SECONDS

            assert config.url is not None
            tls = await self._trusted_context()  # the SDK's client factory cannot wait for it

            def sse_http_client(
                headers: dict[str, str] | None = None,
                timeout: httpx.Timeout | None = None,
                auth: httpx.Auth | None = None,
            ) -> httpx.AsyncClient:
                return self._http_client(tls, headers, timeout, auth)

            read, write = await stack.enter_async_context(
                sse_client(
                    config.url,
                    headers=dict(config.headers),
                    timeout=HTTP_TIMEOUT_SECONDS,
                    httpx_client_factory=sse_http_client,
                )
            )
        return await stack.enter_async_context(
            ClientSession(
                read,
                write,
                message_handler=self._on_message,
                client_info=types.Implementation(name="cairn", version=__version__),
            )
        )

    async def _trusted_context(self) -> ssl.SSLContext:
        """The verifying TLS context of the process (:mod:`cairn.llm.certificates`), also for
        an ``http://`` server: its redirects and its OAuth server may be ``https://``."""
        try:
            return await asyncio.wrap_future(verifying_context())
        except OSError as exc:  # SSL_CERT_FILE names a file that cannot be read
            raise _BadStart(f"cannot set up TLS for {self.config.url}: {exc}") from exc

    def _http_client(
        self,
        tls: ssl.SSLContext,
        headers: dict[str, str] | None,
        timeout: httpx.Timeout | None,
        auth: httpx.Auth | None,
    ) -> httpx.AsyncClient:
        from cairn.mcp.http import http_client

        return http_client(
            name=self.name,
            public_only=self.config.public_only,
            headers=headers,
            timeout=timeout,
            auth=auth,
            tls=tls,
            proxy=self._proxy_settings or ProxySettings(),
        )

    async def _until_gone(self) -> None:
        """Until closed, the process exits, or the transport reports a broken connection."""
        waits: list[asyncio.Future[object]] = [
            asyncio.ensure_future(self._stop.wait()),
            asyncio.ensure_future(self._dead.wait()),
        ]
        if self._process is not None:
            waits.append(asyncio.ensure_future(self._process.exited.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def _discover(
        self, session: ClientSession, capabilities: types.ServerCapabilities
    ) -> None:
        self.tools = (
            await _list_all(session.list_tools, "tools", "tools/list") if capabilities.tools else []
        )
        self.prompts = (
            await _list_all(session.list_prompts, "prompts", "prompts/list")
            if capabilities.prompts
            else []
        )
        if capabilities.resources:
            self.resources = await _list_all(session.list_resources, "resources", "resources/list")
            self.resource_templates = await _list_all(
                session.list_resource_templates, "resourceTemplates", "resources/templates/list"
            )
        else:
            self.resources, self.resource_templates = [], []

    def _failed(self, exc: BaseException) -> None:
        self.status = "failed"
        self.error = self._describe_failure(exc)
        _log.warning(f"MCP server {self.name}: {self.error}")
        self._changed()

    def _describe_failure(self, exc: BaseException) -> str:
        root = _root_cause(exc)
        if isinstance(root, _BadStart):
            return str(root)
        if isinstance(root, TimeoutError):
            return f"did not answer initialize within {self._connect_timeout:g} s" + (
                f" ({self._process.last_stderr()})" if self._process else ""
            )
        if isinstance(root, FileNotFoundError | PermissionError) and self.config.command:
            return f"cannot start `{self.config.command}`: {root.strerror or root}"
        if self._process is not None and (
            self._process.exited.is_set() or isinstance(root, McpError | anyio.ClosedResourceError)
        ):
            return f"failed to start: {self._exit_reason()}"
        if isinstance(root, httpx.HTTPStatusError):
            return f"HTTP {root.response.status_code} from {self.config.url}"
        if isinstance(root, httpx.ProxyError):  # its message names the proxy and what it said
            return f"cannot reach {self.config.url}: {root}"
        untrusted = _untrusted_certificate(root)
        if untrusted is not None:
            return (
                f"cannot reach {self.config.url}: its certificate is not trusted "
                f"({untrusted_advice(untrusted)})"
            )
        if isinstance(root, httpx.HTTPError):
            return f"cannot reach {self.config.url}: {type(root).__name__} {root}".strip()
        return f"failed to start: {type(root).__name__}: {root}"

    def _exit_reason(self) -> str:
        if self._process is not None:
            return self._process.describe_exit()
        return "the server closed the connection"

    def _changed(self) -> None:
        self.generation += 1
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception as exc:
                _log.warning(f"MCP change listener failed: {exc!r}")

    # ----- notifications from the server -----

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            # Transports report a broken HTTP connection this way; no response will follow.
            _log.warning(f"MCP server {self.name}: transport error {message!r}")
            if isinstance(message, httpx.HTTPError | anyio.BrokenResourceError):
                self._dead.set()
            return
        if not isinstance(message, types.ServerNotification):
            return
        match message.root:
            case (
                types.ToolListChangedNotification()
                | types.PromptListChangedNotification()
                | types.ResourceListChangedNotification()
            ):
                # Listing here would wait on the loop that delivers its answer: in a task. A
                # burst of changes is one refresh, and one more for those it may have missed.
                if self._refreshing is not None and not self._refreshing.done():
                    self._refresh_again = True
                else:
                    self._refreshing = self._spawn(self._refresh_until_current())
            case _:
                pass

    async def _refresh_until_current(self) -> None:
        while True:
            self._refresh_again = False
            await self._refresh()
            if not self._refresh_again:
                return

    async def _refresh(self) -> None:
        session = self._session
        if session is None:
            return
        capabilities = session.get_server_capabilities() or types.ServerCapabilities()
        try:
            with anyio.fail_after(self._connect_timeout):
                await self._discover(session, capabilities)
        except Exception as exc:
            _log.warning(f"MCP server {self.name}: refreshing its lists failed: {exc!r}")
            return
        _log.info(f"MCP server {self.name}: lists changed, {len(self.tools)} tools")
        self._changed()

    def _spawn(self, coro: Any) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _lists_settled(self) -> None:
        """Wait (bounded) for a refresh the server asked for while a call ran: a tool that
        adds tools announces it before it answers, so the next request can offer them."""
        refreshing = self._refreshing
        if refreshing is None or refreshing.done():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(REFRESH_WAIT_SECONDS):
                await asyncio.shield(refreshing)

    # ----- requests -----

    async def call_tool(self, tool: str, args: dict[str, Any], *, timeout: float) -> Any:
        """``tools/call``; past ``timeout`` seconds the request is cancelled on the server."""
        return await self._request(
            lambda s: s.call_tool(tool, args), what=f"tool {tool}", timeout=timeout
        )

    async def get_prompt(self, prompt: str, args: dict[str, str]) -> types.GetPromptResult:
        return await self._request(
            lambda s: s.get_prompt(prompt, args or None),
            what=f"prompt {prompt}",
            timeout=self.config.timeout_ms / 1000,
        )

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self._request(
            lambda s: s.read_resource(AnyUrl(uri)),
            what=f"resource {uri}",
            timeout=self.config.timeout_ms / 1000,
        )

    async def _request(
        self, send: Callable[[ClientSession], Any], *, what: str, timeout: float
    ) -> Any:
        session = await self._usable_session()
        request_id = session._request_id  # the id send_request gives the next request
        try:
            async with asyncio.timeout(timeout):
                result = await send(session)
        except TimeoutError:
            self._cancel_on_server(session, request_id, "timed out")
            raise McpCallError(
                f"The MCP {what} of server {self.name} ran past its {timeout:g} s timeout "
                "and was cancelled."
            ) from None
        except asyncio.CancelledError:
            self._cancel_on_server(session, request_id, "cancelled by the user")
            raise
        except McpError as exc:
            if exc.error.code == MALFORMED_RESPONSE:
                raise McpCallError(
                    f"MCP server {self.name} returned a malformed result for the {what} call: "
                    f"{exc.error.message}"
                ) from None
            if self._session is None or exc.error.code == types.CONNECTION_CLOSED:
                await self._settle_exit()
                raise McpCallError(
                    f"MCP server {self.name} went away during the {what} call "
                    f"({self._exit_reason()}); it is restarted on its next use."
                ) from None
            raise McpCallError(f"MCP server {self.name}: {exc.error.message}") from None
        except ValidationError as exc:
            raise McpCallError(
                f"MCP server {self.name} returned a malformed result for the {what} call: "
                f"{_first_error(exc)}"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._settle_exit()
            raise McpCallError(
                f"MCP server {self.name} is not connected ({self._exit_reason()}); "
                "it is restarted on its next use."
            ) from None
        except Exception as exc:
            raise McpCallError(f"MCP server {self.name}: the {what} call failed: {exc}") from None
        await self._lists_settled()
        return result

    async def _settle_exit(self) -> None:
        """Give a dying stdio server a moment to exit, so its exit status can be told."""
        if self._process is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_GRACE_SECONDS):
                    await self._process.exited.wait()

    async def _usable_session(self) -> ClientSession:
        async with self._restart_lock:
            if self._session is None and self._crashed and self.restarts < MAX_RESTARTS:
                self.restarts += 1
                _log.info(f"MCP server {self.name}: restart {self.restarts} of {MAX_RESTARTS}")
                self.start()
                await self.wait_ready()
            if self.status == "connecting":
                await self.wait_ready()
        session = self._session
        if session is not None:
            return session
        if self._crashed and self.restarts >= MAX_RESTARTS:
            raise McpCallError(
                f"MCP server {self.name} crashed and was restarted {MAX_RESTARTS} times; "
                "it is not restarted again in this session."
            )
        raise McpCallError(f"MCP server {self.name} is not connected: {self.error or self.status}")

    def _cancel_on_server(self, session: ClientSession, request_id: int, reason: str) -> None:
        """``notifications/cancelled`` for a request we stop waiting for (never awaited)."""

        async def send() -> None:
            with contextlib.suppress(Exception):
                await session.send_notification(
                    types.ClientNotification(
                        types.CancelledNotification(
                            params=types.CancelledNotificationParams(
                                requestId=request_id, reason=reason
                            )
                        )
                    )
                )

        self._spawn(send())

    def snapshot(self) -> ServerStatus:
        config = self.config
        return ServerStatus(
            name=self.name,
            transport=config.transport,
            status=self.status,
            target=config.target,
            scope=config.scope,
            tools=len([t for t in self.tools if config.offers(t.name)]),
            prompts=len(self.prompts),
            resources=len(self.resources) + len(self.resource_templates),
            error=self.error,
            pid=self.pid if self.status == "connected" else None,
            restarts=self.restarts,
            description=config.description,
        )


async def _answer(request: Awaitable[Any], method: str) -> Any:
    """The result of a start-up request; a malformed one or an error is a :class:`_BadStart`."""
    try:
        return await request
    except ValidationError as exc:
        raise _BadStart(f"sent a malformed answer to {method}: {_first_error(exc)}") from None
    except McpError as exc:
        if exc.error.code == MALFORMED_RESPONSE:
            raise _BadStart(f"sent a malformed answer to {method}: {exc.error.message}") from None
        if exc.error.code == types.CONNECTION_CLOSED:
            raise  # the process went away: its exit status says why
        raise _BadStart(f"answered {method} with an error: {exc.error.message}") from None


async def _list_all(method: Callable[..., Any], attribute: str, name: str) -> list[Any]:
    """Every page of a ``*/list`` request (``name``: the request's method, for errors)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever still ends
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await _answer(method(params=params), name)
        items += getattr(result, attribute)
        cursor = result.nextCursor
        if not cursor:
            break
    return items


def _untrusted_certificate(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification failure behind ``exc``, if that is what it is."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _root_cause(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]
