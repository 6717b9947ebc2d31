"""Connections to real MCP servers (the SDK's, as processes over stdio and HTTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from cairn.abort import AbortSignal
from cairn.debug_log import mirror_warnings
from cairn.mcp.config import ServerConfig
from cairn.mcp.connection import MAX_RESTARTS, McpCallError, McpConnection
from cairn.mcp.manager import SessionMcp
from cairn.testing.mcp import RunningMcpServer, pid_alive
from cairn.tools.base import ToolContext

from ..polling import eventually_async
from .helpers import raw_config, server_log, stdio_config, tools_server

pytestmark = pytest.mark.slow


def _ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, abort=AbortSignal())


async def _connected(config: ServerConfig, tmp_path: Path, **kwargs: float) -> McpConnection:
    connection = McpConnection(config, cwd=tmp_path, **kwargs)
    connection.start()
    assert await connection.wait_ready(30)
    return connection


async def test_a_stdio_server_is_listed_and_its_tool_called(tmp_path: Path) -> None:
    connection = await _connected(stdio_config(tools_server(tmp_path)), tmp_path)
    try:
        assert connection.status == "connected", connection.error
        assert {t.name for t in connection.tools} >= {"echo", "write_note", "slow"}
        assert [p.name for p in connection.prompts] == ["review"]
        assert [str(r.uri) for r in connection.resources] == ["notes://today"]
        result = await connection.call_tool("echo", {"text": "hi"}, timeout=10)
        assert result.content[0].text == "echo: hi"
    finally:
        await connection.aclose()
    assert connection.status == "closed"


async def test_closing_stops_the_server_process(tmp_path: Path) -> None:
    server = tools_server(tmp_path)
    connection = await _connected(stdio_config(server), tmp_path)
    pid = connection.pid
    assert pid is not None and pid in server.pids() and pid_alive(pid)
    await connection.aclose()
    assert not pid_alive(pid)


async def test_a_server_that_cannot_be_started_fails_with_the_reason(tmp_path: Path) -> None:
    missing = ServerConfig("ghost", "stdio", command="cairn-no-such-program")
    connection = await _connected(missing, tmp_path)
    assert connection.status == "failed"
    assert connection.error == "cannot start `cairn-no-such-program`: No such file or directory"


async def test_a_server_that_exits_at_start_reports_its_stderr(tmp_path: Path) -> None:
    config = stdio_config(tools_server(tmp_path, MCP_TEST_FAIL_START="1"))
    connection = await _connected(config, tmp_path)
    assert connection.status == "failed"
    assert connection.error is not None
    assert "exited with code 3" in connection.error
    assert "the test server was told to fail" in connection.error


async def test_a_server_that_hangs_in_initialize_fails_after_the_connect_timeout(
    tmp_path: Path,
) -> None:
    server = tools_server(tmp_path, MCP_TEST_HANG_SECONDS="60")
    connection = await _connected(stdio_config(server), tmp_path, connect_timeout=1.0)
    assert connection.status == "failed"
    assert (
        connection.error is not None and "did not answer initialize within 1 s" in connection.error
    )
    assert all(not pid_alive(pid) for pid in server.pids())


async def test_closing_a_server_still_in_initialize_stops_it(tmp_path: Path) -> None:
    server = tools_server(tmp_path, MCP_TEST_HANG_SECONDS="60")
    connection = McpConnection(stdio_config(server), cwd=tmp_path)
    connection.start()
    await eventually_async(lambda: bool(server.pids()))
    assert not await connection.wait_ready(0.2)
    await connection.aclose()
    assert connection.status == "closed"
    assert server.pids() and not any(pid_alive(pid) for pid in server.pids())


async def test_garbage_on_stdout_is_skipped_and_the_server_still_works(tmp_path: Path) -> None:
    connection = await _connected(
        stdio_config(tools_server(tmp_path, MCP_TEST_GARBAGE="1")), tmp_path
    )
    try:
        assert connection.status == "connected", connection.error
        result = await connection.call_tool("echo", {"text": "still here"}, timeout=10)
        assert result.content[0].text == "echo: still here"
    finally:
        await connection.aclose()


async def test_a_malformed_result_is_an_error_naming_the_server(tmp_path: Path) -> None:
    connection = await _connected(raw_config(tmp_path, "malformed"), tmp_path)
    try:
        assert connection.status == "connected", connection.error
        with pytest.raises(McpCallError, match="raw returned a malformed result"):
            await connection.call_tool("broken", {}, timeout=10)
    finally:
        await connection.aclose()


async def test_an_answer_that_is_not_json_rpc_is_an_error_for_its_call_not_a_wait(
    tmp_path: Path,
) -> None:
    """Bug: a line carrying a request's id that failed JSON-RPC validation was skipped as
    garbage, so the call waited for its whole timeout (10 minutes by default)."""
    connection = await _connected(raw_config(tmp_path, "bad-message"), tmp_path)
    try:
        assert connection.status == "connected", connection.error
        with pytest.raises(McpCallError) as error:
            await connection.call_tool("broken", {}, timeout=600)
        assert str(error.value).startswith(
            "MCP server raw returned a malformed result for the tool broken call: "
        )
        assert connection.status == "connected"  # one bad answer, not a broken server
    finally:
        await connection.aclose()


async def test_a_fifty_megabyte_result_arrives_whole(tmp_path: Path) -> None:
    """#24 Medium: "reading a large MCP result is quadratic (50 MB: 30 s, on the event loop)":
    the buffer was split again at every chunk. The time is in benchmarks/mcp_read_bench.py."""
    config = raw_config(tmp_path, "huge")
    connection = await _connected(
        replace(config, env={**config.env, "MCP_TEST_HUGE_MB": "50"}), tmp_path
    )
    try:
        result = await connection.call_tool("broken", {}, timeout=120)
        [content] = result.content
        assert content.text == "x" * (50 * 1024 * 1024)
        assert connection.status == "connected"
    finally:
        await connection.aclose()


async def test_an_answer_nested_100000_deep_is_an_error_for_its_call_not_a_closed_stdout(
    tmp_path: Path,
) -> None:
    """#24 Low: "a server's 100,000-deep JSON is reported as 'the server closed its stdout'":
    the reader died of a RecursionError and the server was treated as gone."""
    connection = await _connected(raw_config(tmp_path, "deep"), tmp_path)
    try:
        for _ in range(2):  # the server is still there for the next call
            with pytest.raises(McpCallError) as error:
                await connection.call_tool("broken", {}, timeout=60)
            assert str(error.value) == (
                "MCP server raw returned a malformed result for the tool broken call: "
                "the answer is nested too deeply to read"
            )
        assert connection.status == "connected" and connection.restarts == 0
    finally:
        await connection.aclose()


async def test_twenty_thousand_list_changed_notifications_are_one_refresh_and_one_more(
    tmp_path: Path,
) -> None:
    """#24 Low: "20,000 tools/list_changed notifications took 67 s and printed RuntimeError:
    Event loop is closed at exit": each notification started a refresh of its own."""
    connection = await _connected(raw_config(tmp_path, "flood"), tmp_path)
    try:
        result = await connection.call_tool("broken", {}, timeout=120)
        assert result.content[0].text == "flooded"
    finally:
        await connection.aclose()
    requests = (tmp_path / "raw.log").read_text().splitlines()
    # the listing at start, one refresh, and one more for the changes it may have missed
    assert requests.count("tools/list") == 3, requests.count("tools/list")


async def test_what_a_server_sends_that_cairn_cannot_read_is_one_line_naming_the_server(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """#30: "a misbehaving stdio MCP server dumps 56 lines of pydantic errors to stderr" (the
    SDK logs every validation error of a notification it cannot read)."""
    warnings = io.StringIO()
    mirror_warnings(warnings)
    connection = await _connected(raw_config(tmp_path, "bad-notification"), tmp_path)
    try:
        result = await connection.call_tool("broken", {}, timeout=30)
    finally:
        await connection.aclose()
        mirror_warnings(None)

    assert result.content[0].text == "noisy"
    assert warnings.getvalue().splitlines() == [
        "warning: [MCP] MCP server raw sent a notification cairn cannot read "
        "(notifications/progress: params.progressToken: Field required); it was skipped",
        "warning: [MCP] MCP server raw sent a notification cairn does not know "
        "(notifications/whatever); it was skipped",
        "warning: [MCP] MCP server raw sent a request cairn cannot read "
        "(sampling/createMessage: params.messages: Field required); it was skipped",
    ]
    assert "validation error" not in capfd.readouterr().err
    [answer] = [line for line in server_log_raw(tmp_path) if line.startswith("answer ")]
    assert '"code": -32602' in answer and "sampling/createMessage" in answer


def server_log_raw(tmp_path: Path) -> list[str]:
    return (tmp_path / "raw.log").read_text().splitlines()


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("bad-initialize", "sent a malformed answer to initialize: "),
        ("bad-tools", "sent a malformed answer to tools/list: tools.0.name: "),
        ("refuse-initialize", "answered initialize with an error: no licence"),
    ],
)
async def test_a_malformed_answer_at_start_fails_the_server_with_what_was_wrong(
    tmp_path: Path, mode: str, reason: str
) -> None:
    connection = await _connected(raw_config(tmp_path, mode), tmp_path)
    assert connection.status == "failed"
    assert connection.error is not None and connection.error.startswith(reason), connection.error
    assert connection.pid is None or not pid_alive(connection.pid)


async def test_a_crash_mid_call_is_an_error_and_the_next_call_restarts_the_server(
    tmp_path: Path,
) -> None:
    server = tools_server(tmp_path)
    connection = await _connected(stdio_config(server), tmp_path)
    first_pid = connection.pid
    try:
        with pytest.raises(McpCallError, match="went away during the tool crash call"):
            await connection.call_tool("crash", {}, timeout=10)
        await eventually_async(lambda: connection.status == "failed")
        assert connection.status == "failed"
        assert connection.error is not None and "exited with code 7" in connection.error
        assert connection.restartable

        result = await connection.call_tool("echo", {"text": "back"}, timeout=10)
        assert result.content[0].text == "echo: back"
        assert connection.restarts == 1
        assert connection.pid != first_pid
    finally:
        await connection.aclose()
    assert all(not pid_alive(pid) for pid in server.pids())


async def test_restarts_are_bounded(tmp_path: Path) -> None:
    connection = await _connected(stdio_config(tools_server(tmp_path)), tmp_path)
    try:
        for _ in range(MAX_RESTARTS + 1):
            with pytest.raises(McpCallError):
                await connection.call_tool("crash", {}, timeout=10)
            await connection.wait_ready(10)
            assert await eventually_async(lambda: connection.status != "connected")  # crash seen
        assert connection.restarts == MAX_RESTARTS
        with pytest.raises(McpCallError, match=f"restarted {MAX_RESTARTS} times"):
            await connection.call_tool("echo", {"text": "x"}, timeout=10)
    finally:
        await connection.aclose()
    starts = [line for line in server_log(tmp_path) if line.startswith("start")]
    assert len(starts) == MAX_RESTARTS + 1


async def test_a_call_past_its_timeout_is_cancelled_on_the_server(tmp_path: Path) -> None:
    connection = await _connected(stdio_config(tools_server(tmp_path)), tmp_path)
    try:
        with pytest.raises(McpCallError, match=r"ran past its 0\.5 s timeout and was cancelled"):
            await connection.call_tool("slow", {"seconds": 30}, timeout=0.5)
        await eventually_async(lambda: "cancelled slow" in server_log(tmp_path))
        assert "cancelled slow" in server_log(tmp_path)
        result = await connection.call_tool("echo", {"text": "after"}, timeout=10)
        assert result.content[0].text == "echo: after"
    finally:
        await connection.aclose()


async def test_cancelling_the_caller_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    connection = await _connected(stdio_config(tools_server(tmp_path)), tmp_path)
    try:
        call = asyncio.create_task(connection.call_tool("slow", {"seconds": 30}, timeout=60))
        assert await eventually_async(lambda: "slow started" in server_log(tmp_path))
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await eventually_async(lambda: "cancelled slow" in server_log(tmp_path))
        assert "cancelled slow" in server_log(tmp_path)
    finally:
        await connection.aclose()


async def test_a_tool_list_change_adds_the_new_tool(tmp_path: Path) -> None:
    """Bug: the refresh a call's list_changed started was not waited for, so the request right
    after the call (the one that could use the new tool) went out without it."""
    view = SessionMcp(None, [stdio_config(tools_server(tmp_path))], cwd=tmp_path)
    view.start()
    try:
        assert await view.wait_for_discovery(30) == []
        names = [t.name for t in view.tools([])]
        assert "mcp__tools__extra" not in names
        grow = next(t for t in view.tools([]) if t.name == "mcp__tools__grow")
        result = await grow.execute({}, _ctx(tmp_path))
        assert result.output == "added a tool"
        extra = next(t for t in view.tools([]) if t.name == "mcp__tools__extra")
        assert (await extra.execute({}, _ctx(tmp_path))).output == "extra tool ran"
    finally:
        await view.aclose()


ServeHttp = Callable[[str], RunningMcpServer]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeHttp]:
    """``http_server(transport)``: the module's one test server over HTTP or SSE, started on
    first use (a server start is ~1.5 s of CPU) and shared by the tests that only connect to it
    and call ``echo``: each makes its own connection, the server keeps no state between them."""
    with contextlib.ExitStack() as running:
        started: dict[str, RunningMcpServer] = {}

        def serve(transport: str) -> RunningMcpServer:
            if transport not in started:
                server = tools_server(tmp_path_factory.mktemp(f"mcp-{transport}"))
                started[transport] = running.enter_context(server.serve_http(transport))  # type: ignore[arg-type]
            return started[transport]

        yield serve


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_http_and_sse_servers_are_listed_and_called(
    tmp_path: Path, transport: str, http_server: ServeHttp
) -> None:
    running = http_server(transport)
    config = ServerConfig("web", transport, url=running.url)  # type: ignore[arg-type]
    connection = await _connected(config, tmp_path)
    try:
        assert connection.status == "connected", connection.error
        result = await connection.call_tool("echo", {"text": transport}, timeout=10)
        assert result.content[0].text == f"echo: {transport}"
    finally:
        await connection.aclose()


async def test_an_http_server_that_is_not_there_fails_with_the_reason(tmp_path: Path) -> None:
    config = ServerConfig("web", "http", url="http://127.0.0.1:9/mcp")
    connection = await _connected(config, tmp_path)
    assert connection.status == "failed"
    assert (
        connection.error is not None and "cannot reach http://127.0.0.1:9/mcp" in connection.error
    )


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_public_only_server_on_a_loopback_address_is_not_connected_to(
    tmp_path: Path, transport: str, http_server: ServeHttp
) -> None:
    """#24 follow-up: a daemon tenant's HTTP or SSE server (``public_only``) on loopback is
    refused as it is connected to, with the reason and what allows it, and never reached."""
    running = http_server(transport)
    reachable = ServerConfig("web", transport, url=running.url)  # type: ignore[arg-type]
    config = replace(reachable, public_only=True)
    connection = await _connected(config, tmp_path)
    await connection.aclose()
    connected = await _connected(reachable, tmp_path)  # the same server, not public_only
    await connected.aclose()

    assert connection.status in ("failed", "closed") and connection.error is not None
    assert "127.0.0.1 is refused" in connection.error and "a loopback address" in connection.error
    assert "--allow-private-mcp" in connection.error
    assert connected.error is None and connected.tools
