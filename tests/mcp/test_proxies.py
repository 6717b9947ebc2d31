"""HTTP and SSE MCP servers behind a real forward proxy (Debian's tinyproxy).

An MCP server's proxy is chosen as the model endpoint's (:mod:`cairn.llm.proxies`): ``--proxy``
(``CAIRN_PROXY``), the ``proxy`` setting, then ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``,
with ``NO_PROXY`` by curl's rules. The proxy's log says what it carried (``POST http://...`` for
a request in absolute form); the servers are real ones on 127.0.0.1 (``cairn.testing.mcp``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.mcp.config import ProxySettings, ServerConfig
from cairn.mcp.connection import McpConnection
from cairn.testing.mcp import RunningMcpServer
from cairn.testing.tinyproxy import TinyProxy, find_tinyproxy

from ..certificates import Certificates, certificates_fixture  # noqa: F401 (a fixture)
from .helpers import tools_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        find_tinyproxy() is None, reason="tinyproxy is not installed (.ci/system-packages)"
    ),
]
_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "CAIRN_PROXY")
_CA_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")
ServeHttp = Callable[[str], RunningMcpServer]


@pytest.fixture(autouse=True)
def _no_inherited_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name in _CA_VARIABLES:  # the machine's: each test names the CAs it trusts
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def proxy() -> Iterator[TinyProxy]:
    with TinyProxy() as running:
        yield running


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeHttp]:
    """``http_server(transport)``: the module's test server over HTTP or SSE, started on first
    use and shared (each test makes its own connection; the server keeps no state)."""
    with contextlib.ExitStack() as running:
        started: dict[str, RunningMcpServer] = {}

        def serve(transport: str) -> RunningMcpServer:
            if transport not in started:
                server = tools_server(tmp_path_factory.mktemp(f"mcp-{transport}"))
                started[transport] = running.enter_context(server.serve_http(transport))  # type: ignore[arg-type]
            return started[transport]

        yield serve


def _origin(running: RunningMcpServer) -> str:
    return running.url.rsplit("/", 1)[0]  # http://127.0.0.1:<port>


async def _echo(
    config: ServerConfig, tmp_path: Path, proxy_settings: ProxySettings | None = None
) -> McpConnection:
    """A connection to ``config`` that called ``echo``; the caller closes it."""
    kwargs = {} if proxy_settings is None else {"proxy_settings": proxy_settings}
    connection = McpConnection(config, cwd=tmp_path, **kwargs)  # type: ignore[arg-type]
    connection.start()
    assert await connection.wait_ready(30)
    assert connection.status == "connected", connection.error
    result = await connection.call_tool("echo", {"text": "hi"}, timeout=10)
    assert result.content[0].text == "echo: hi"
    return connection


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_the_proxy_flag_carries_an_http_or_sse_server(
    tmp_path: Path,
    transport: str,
    http_server: ServeHttp,
    proxy: TinyProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: MCP's HTTP client read proxies from the environment through httpx, which knows
    nothing of ``--proxy`` (``CAIRN_PROXY``): the model went through the proxy, MCP direct."""
    running = http_server(transport)
    monkeypatch.setenv("CAIRN_PROXY", proxy.url)

    connection = await _echo(ServerConfig("web", transport, url=running.url), tmp_path)  # type: ignore[arg-type]
    await connection.aclose()

    carried = proxy.requests()
    assert f"POST {_origin(running)}" in " ".join(carried), carried
    assert all(request.split()[1].startswith(_origin(running)) for request in carried), carried


async def test_the_proxy_setting_carries_an_http_server(
    tmp_path: Path, http_server: ServeHttp, proxy: TinyProxy
) -> None:
    running = http_server("http")

    connection = await _echo(
        ServerConfig("web", "http", url=running.url), tmp_path, ProxySettings(proxy=proxy.url)
    )
    await connection.aclose()

    assert f"POST {running.url}" in proxy.requests()


async def test_http_proxy_in_the_settings_env_carries_an_http_server(
    tmp_path: Path, http_server: ServeHttp, proxy: TinyProxy
) -> None:
    running = http_server("http")

    connection = await _echo(
        ServerConfig("web", "http", url=running.url),
        tmp_path,
        ProxySettings(env={"HTTP_PROXY": proxy.url}),
    )
    await connection.aclose()

    assert f"POST {running.url}" in proxy.requests()


async def test_http_proxy_from_the_environment_carries_an_http_server(
    tmp_path: Path, http_server: ServeHttp, proxy: TinyProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = http_server("http")
    monkeypatch.setenv("HTTP_PROXY", proxy.url)

    connection = await _echo(ServerConfig("web", "http", url=running.url), tmp_path)
    await connection.aclose()

    assert f"POST {running.url}" in proxy.requests()


@pytest.mark.parametrize("no_proxy", ["127.0.0.0/8", "127.0.0.1", ".0.0.1,127.0.0.1:1,*"])
async def test_no_proxy_sends_a_listed_server_direct_by_curls_rules(
    tmp_path: Path,
    http_server: ServeHttp,
    proxy: TinyProxy,
    monkeypatch: pytest.MonkeyPatch,
    no_proxy: str,
) -> None:
    """Bug: httpx read ``NO_PROXY`` by its own rules, not curl's: a CIDR block
    (``127.0.0.0/8``) exempted nothing, so the server went through the proxy."""
    running = http_server("http")
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", no_proxy)

    connection = await _echo(ServerConfig("web", "http", url=running.url), tmp_path)
    await connection.aclose()

    assert proxy.requests() == []


async def test_a_proxy_that_wants_credentials_is_named_in_the_servers_error(
    tmp_path: Path, http_server: ServeHttp, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = http_server("http")
    with TinyProxy(user="alice", password="s3cret") as proxy:
        monkeypatch.setenv("CAIRN_PROXY", proxy.url)
        connection = McpConnection(ServerConfig("web", "http", url=running.url), cwd=tmp_path)
        connection.start()
        assert await connection.wait_ready(30)
        await connection.aclose()

        assert connection.status in ("failed", "closed")
        assert connection.error is not None
        assert f"the proxy {proxy.url} (--proxy) refused the request" in connection.error
        assert "407" in connection.error

        monkeypatch.setenv("CAIRN_PROXY", proxy.url_with_credentials())
        connection = await _echo(ServerConfig("web", "http", url=running.url), tmp_path)
        await connection.aclose()
    assert "s3cret" not in (connection.error or "")


async def test_a_tenants_server_never_goes_through_the_proxy(
    tmp_path: Path, http_server: ServeHttp, proxy: TinyProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon tenant's server (``public_only``) is checked at the address it connects to,
    which a proxy would hide: it connects direct, and a private address is still refused."""
    running = http_server("http")
    monkeypatch.setenv("CAIRN_PROXY", proxy.url)
    config = ServerConfig("web", "http", url=running.url, public_only=True)

    connection = McpConnection(config, cwd=tmp_path)
    connection.start()
    assert await connection.wait_ready(30)
    await connection.aclose()

    assert connection.error is not None and "private or local address" in connection.error
    assert proxy.requests() == []


@pytest.fixture(scope="module")
def https_server(
    tmp_path_factory: pytest.TempPathFactory, certificates: Certificates
) -> Iterator[RunningMcpServer]:
    """The test server over HTTPS, with a certificate from the test CA."""
    server = tools_server(tmp_path_factory.mktemp("mcp-https"))
    with server.serve_http("http", tls=(certificates.cert, certificates.key)) as running:
        yield running


async def test_an_https_server_is_reached_through_a_tunnel_trusting_node_extra_ca_certs(
    tmp_path: Path,
    https_server: RunningMcpServer,
    proxy: TinyProxy,
    certificates: Certificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: MCP's client trusted SSL_CERT_FILE (httpx's reading) but not NODE_EXTRA_CA_CERTS,
    which the model endpoint now honours: a TLS-intercepting proxy's CA set for Node tools
    worked for the model and failed every HTTPS MCP server."""
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(certificates.ca))

    connection = await _echo(ServerConfig("web", "http", url=https_server.url), tmp_path)
    await connection.aclose()

    port = https_server.url.split(":")[2].split("/")[0]
    assert f"CONNECT 127.0.0.1:{port}" in proxy.requests()


async def test_an_https_server_whose_ca_is_not_trusted_says_where_the_ca_goes(
    tmp_path: Path, https_server: RunningMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "corporate-ca.pem"
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(missing))
    connection = McpConnection(ServerConfig("web", "http", url=https_server.url), cwd=tmp_path)
    connection.start()
    assert await connection.wait_ready(30)
    await connection.aclose()

    assert connection.error is not None
    assert connection.error.startswith(
        f"cannot reach {https_server.url}: its certificate is not trusted ("
    )
    assert "name its CA in NODE_EXTRA_CA_CERTS (added to the bundle), SSL_CERT_FILE" in (
        connection.error
    )
    assert f"NODE_EXTRA_CA_CERTS names {str(missing)!r}, which was not added" in connection.error
