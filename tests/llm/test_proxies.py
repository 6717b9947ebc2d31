"""Which proxy the model endpoint goes through: the sources' order, NO_PROXY's rules, the URL.

The proxy itself is exercised for real in tests/e2e/test_model_proxy.py (tinyproxy).
"""

from __future__ import annotations

import base64
import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.content import Content
from cairn.llm.errors import ProxyError
from cairn.llm.openai import OpenAIProvider
from cairn.llm.proxies import (
    Proxy,
    ProxyRoutes,
    bypasses,
    parse_proxy,
    proxy_routes,
)
from cairn.llm.types import ModelRequest
from cairn.testing import ScriptedServer, reply
from cairn.testing.tinyproxy import TinyProxy, find_tinyproxy


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "bypassed"),
    [
        ("api.example.com", 443, "example.com", True),
        ("example.com", 443, "example.com", True),
        ("example.com", 443, ".example.com", True),
        ("api.example.com", 443, ".example.com", True),
        ("notexample.com", 443, "example.com", False),
        ("example.com.evil.net", 443, "example.com", False),
        ("API.Example.COM.", 443, "example.com", True),
        ("anything", 1, "*", True),
        ("api.example.com", 443, "other.org, example.com", True),
        ("api.example.com", 443, "other.org example.com", True),
        ("api.example.com", 443, "example.com:8443", False),
        ("api.example.com", 8443, "example.com:8443", True),
        ("127.0.0.1", 8080, "127.0.0.1", True),
        ("127.0.0.1", 8080, "127.0.0.1:9090", False),
        ("127.0.0.1", 8080, "localhost", False),  # names are never resolved
        ("localhost", 8080, "127.0.0.1", False),
        ("10.1.2.3", 80, "10.0.0.0/8", True),
        ("11.1.2.3", 80, "10.0.0.0/8", False),
        ("::1", 80, "::1", True),
        ("::1", 80, "[::1]:80", True),
        ("::1", 81, "[::1]:80", False),
        ("fe80::1", 80, "fe80::/10", True),
        ("api.example.com", 443, "", False),
        ("api.example.com", 443, " , ,", False),
    ],
)
def test_no_proxy_follows_curls_rules(host: str, port: int, no_proxy: str, bypassed: bool) -> None:
    assert bypasses(host, port, no_proxy) is bypassed


@given(st.text(), st.integers(0, 65535), st.text())
def test_any_no_proxy_value_is_read_without_an_exception(host: str, port: int, value: str) -> None:
    bypasses(host, port, value)


@given(st.text())
def test_any_proxy_url_is_a_proxy_or_a_proxy_error(raw: str) -> None:
    with contextlib.suppress(ProxyError):
        parse_proxy(raw, "HTTPS_PROXY")


def test_credentials_in_the_url_become_basic_proxy_authorization() -> None:
    proxy = parse_proxy("http://al%40ice:p%3Ass@proxy.corp:3128", "HTTPS_PROXY")

    assert proxy == Proxy(
        "proxy.corp", 3128, b"Basic " + base64.b64encode(b"al@ice:p:ss"), "HTTPS_PROXY"
    )
    assert proxy.named() == "the proxy http://proxy.corp:3128 (HTTPS_PROXY)"


def test_a_proxy_without_a_scheme_is_http_and_without_a_port_is_80() -> None:
    assert parse_proxy("proxy.corp:8080", "p").shown == "http://proxy.corp:8080"
    assert parse_proxy("http://proxy.corp", "p").port == 80
    assert parse_proxy("http://[::1]:3128", "p").shown == "http://[::1]:3128"


@pytest.mark.parametrize(
    "raw",
    [
        "socks5://bob:hunter2@proxy:1080",
        "https://bob:hunter2@proxy:443",
        "http://bob:hunter2@proxy:99999",
        "http://bob:hunter2@:8080",
    ],
)
def test_an_unusable_proxy_url_is_refused_without_showing_its_password(raw: str) -> None:
    with pytest.raises(ProxyError) as caught:
        parse_proxy(raw, "ALL_PROXY")

    assert "(ALL_PROXY)" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert not caught.value.retryable


_PROXY_VARIABLES = ("CAIRN_PROXY", "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")


@pytest.fixture
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*_PROXY_VARIABLES, "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_proxy_variables")
def test_no_proxy_set_anywhere_means_no_routes() -> None:
    assert proxy_routes(None, {}) is None
    assert proxy_routes("  ", {"NO_PROXY": "*"}) is None


def _source(routes: ProxyRoutes, scheme: str = "https") -> str | None:
    proxy = routes.for_origin(scheme, "api.example.com", 443)
    return None if proxy is None else proxy.source


def test_the_flag_beats_the_setting_which_beats_the_environment() -> None:
    env = {"HTTPS_PROXY": "http://env:1", "CAIRN_PROXY": "http://flag:1"}

    assert _source(ProxyRoutes("http://setting:1", env)) == "--proxy"
    assert _source(ProxyRoutes("http://setting:1", {"HTTPS_PROXY": "http://env:1"})) == (
        "the proxy setting"
    )
    assert _source(ProxyRoutes(None, {"HTTPS_PROXY": "http://env:1"})) == "HTTPS_PROXY"


def test_each_scheme_reads_its_own_variable_then_all_proxy_lowercase_first() -> None:
    env = {"https_proxy": "http://a:1", "HTTPS_PROXY": "http://b:1", "ALL_PROXY": "http://c:1"}

    assert _source(ProxyRoutes(None, env)) == "https_proxy"
    assert _source(ProxyRoutes(None, env), "http") == "ALL_PROXY"
    assert _source(ProxyRoutes(None, {"HTTP_PROXY": "http://h:1"}), "https") is None


def test_http_proxy_is_ignored_in_a_cgi_request() -> None:
    """httpoxy: a CGI request's ``Proxy:`` header arrives as ``HTTP_PROXY``."""
    env = {"HTTP_PROXY": "http://attacker:1", "REQUEST_METHOD": "GET"}

    assert _source(ProxyRoutes(None, env), "http") is None


def test_no_proxy_exempts_the_flags_proxy_too() -> None:
    env = {"CAIRN_PROXY": "http://flag:1", "NO_PROXY": "example.com"}

    assert _source(ProxyRoutes(None, env)) is None


@pytest.mark.usefixtures("no_proxy_variables")
def test_the_settings_env_is_a_fallback_the_environment_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routes = proxy_routes(None, {"HTTPS_PROXY": "http://from-settings:1"})
    assert routes is not None
    assert _source(routes) == "HTTPS_PROXY"

    monkeypatch.setenv("HTTPS_PROXY", "http://from-process:1")
    routes = proxy_routes(None, {"HTTPS_PROXY": "http://from-settings:1"})
    assert routes is not None
    proxy = routes.for_origin("https", "api.example.com", 443)
    assert proxy is not None and proxy.host == "from-process"


@pytest.mark.usefixtures("no_proxy_variables")
def test_the_flags_variable_in_a_settings_env_is_not_the_flag() -> None:
    """``CAIRN_PROXY`` is what ``--proxy`` sets; settings say ``proxy`` (or ``HTTPS_PROXY``)."""
    assert proxy_routes(None, {"CAIRN_PROXY": "http://from-settings:1"}) is None


# ----- a provider through a real proxy: every pool, the model list -----------------------------

needs_tinyproxy = pytest.mark.skipif(
    find_tinyproxy() is None, reason="tinyproxy is not installed (.ci/system-packages)"
)


@needs_tinyproxy
async def test_every_pool_of_a_provider_and_its_model_list_go_through_the_proxy(
    scripted_server: ScriptedServer,
) -> None:
    """A daemon's provider spreads sessions over several pools: each pool, the model list and
    the context-window question take the same proxy."""
    scripted_server.default = reply("ok")
    with TinyProxy() as proxy:
        provider = OpenAIProvider(
            base_url=scripted_server.base_url,
            api_key="secret-key",
            model="scripted-model",
            pools=4,
            proxies=ProxyRoutes(None, {"HTTP_PROXY": proxy.url}),
        )
        try:
            sessions = [f"session-{n}" for n in range(8)]
            for session in sessions:
                request = ModelRequest(
                    model="scripted-model", contents=[Content.user("hi")], session_id=session
                )
                [event async for event in provider.stream(request)]
            listed = await provider.list_models()
            await provider.learn_context_window("scripted-model")
        finally:
            await provider.aclose()

        carried = proxy.requests()
    base = scripted_server.base_url
    assert carried.count(f"POST {base}/chat/completions") == len(sessions)
    assert carried.count(f"GET {base}/models") == 2  # the list, then the window's question
    assert [model.id for model in listed] == ["scripted-model"]
    received = [*scripted_server.requests, *scripted_server.other_requests]
    assert len(received) == len(carried)  # nothing went direct
    assert all("tinyproxy" in r.headers.get("via", "") for r in received)
