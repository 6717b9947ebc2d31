"""web_search against a search provider served on 127.0.0.1 speaking Tavily's and Google
Programmable Search's JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from cairn.config.settings import WebSearchSettings
from cairn.tools.base import ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.web_search import MAX_SNIPPET_CHARS, WebSearchTool, web_search_tool

from .test_web_fetch import QuietHandler, serve

TAVILY_ANSWER = {
    "query": "python 3.13",
    "results": [
        {
            "title": "What's New In Python 3.13",
            "url": "https://docs.python.org/3/whatsnew/3.13.html",
            "content": "Python 3.13 adds a new\n interactive interpreter.",
            "score": 0.9,
        },
        {"title": "No link", "content": "dropped"},
        {"title": "", "url": "https://peps.python.org/pep-0719/", "content": "x" * 900},
    ],
}
GOOGLE_ANSWER = {
    "items": [
        {"title": "tokio - Rust", "link": "https://docs.rs/tokio", "snippet": "A runtime."},
        {"title": "Tokio", "link": "https://tokio.rs/", "snippet": "Build reliable apps."},
    ]
}
# path -> (status, content type, body); "/tavily-*" and "/google-*" are base URLs.
ROUTES: dict[str, tuple[int, str, bytes]] = {
    "/tavily/search": (200, "application/json", json.dumps(TAVILY_ANSWER).encode()),
    "/google/customsearch/v1": (200, "application/json", json.dumps(GOOGLE_ANSWER).encode()),
    "/empty/customsearch/v1": (200, "application/json", b'{"searchInformation": {}}'),
    "/broken/search": (200, "application/json", b'{"results": [oops'),
    "/html/search": (200, "text/html", b"<html>Service Unavailable</html>"),
    "/listed/search": (200, "application/json", b'{"results": {"title": "x"}}'),
    "/denied/search": (401, "application/json", b'{"detail": {"error": "Invalid API key"}}'),
}


class ProviderHandler(QuietHandler):
    seen: ClassVar[list[dict[str, Any]]] = []  # the requests, for the test to read

    def _answer(self, body: bytes = b"") -> None:
        parts = urlsplit(self.path)
        self.seen.append(
            {
                "method": self.command,
                "path": parts.path,
                "query": parse_qs(parts.query),
                "headers": dict(self.headers),
                "body": json.loads(body) if body else None,
            }
        )
        status, content_type, payload = ROUTES[parts.path]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers["Content-Length"])))


@pytest.fixture(scope="module")
def provider_server() -> Iterator[str]:
    yield from serve(ProviderHandler)


def searcher(base_url: str, provider: str = "tavily", **settings: Any) -> WebSearchTool:
    tool = web_search_tool(
        WebSearchSettings(provider=provider, api_key="k-123", base_url=base_url, **settings), {}
    )
    assert tool is not None
    return tool


async def test_tavily_results_are_a_numbered_list_of_title_url_and_snippet(
    provider_server: str, ctx: ToolContext
) -> None:
    ProviderHandler.seen.clear()

    result = await searcher(f"{provider_server}/tavily", max_results=3).execute(
        {"query": "python 3.13"}, ctx
    )

    assert result.error is None
    assert result.output is not None
    lines = result.output.splitlines()
    assert lines[:5] == [
        "Web results for 'python 3.13':",
        "",
        "1. What's New In Python 3.13",
        "   https://docs.python.org/3/whatsnew/3.13.html",
        "   Python 3.13 adds a new interactive interpreter.",
    ]
    assert lines[5:7] == [
        "2. https://peps.python.org/pep-0719/",
        "   https://peps.python.org/pep-0719/",
    ]
    assert lines[7] == "   " + "x" * MAX_SNIPPET_CHARS + "…"
    assert "dropped" not in result.output
    (request,) = ProviderHandler.seen
    assert request["method"] == "POST"
    assert request["body"] == {"query": "python 3.13", "max_results": 3}
    assert request["headers"]["Authorization"] == "Bearer k-123"


async def test_google_programmable_search_gets_key_engine_and_count(
    provider_server: str, ctx: ToolContext
) -> None:
    ProviderHandler.seen.clear()
    tool = searcher(f"{provider_server}/google", "google", search_engine_id="cx-9", max_results=1)

    result = await tool.execute({"query": "tokio"}, ctx)

    assert result.output == (
        "Web results for 'tokio':\n\n1. tokio - Rust\n   https://docs.rs/tokio\n   A runtime."
    )
    (request,) = ProviderHandler.seen
    assert request["query"] == {"key": ["k-123"], "cx": ["cx-9"], "q": ["tokio"], "num": ["1"]}


async def test_no_results_say_so(provider_server: str, ctx: ToolContext) -> None:
    tool = searcher(f"{provider_server}/empty", "google", search_engine_id="cx")

    result = await tool.execute({"query": "zzqx"}, ctx)

    assert result.error is None and result.output == "No web results for 'zzqx'."


@pytest.mark.parametrize(
    ("base", "error"),
    [
        ("/broken", "tavily search answered something that is not JSON"),
        ("/html", "tavily search answered something that is not JSON"),
        ("/listed", "tavily search answered 'results' that is not a list"),
        ("/denied", 'tavily search answered HTTP 401: {"detail": {"error": "Invalid API key"}}'),
    ],
)
async def test_a_failing_or_malformed_provider_answer_is_a_clear_error(
    provider_server: str, ctx: ToolContext, base: str, error: str
) -> None:
    result = await searcher(f"{provider_server}{base}").execute({"query": "q"}, ctx)

    assert result.error is not None and error in result.error
    assert "Traceback" not in result.error


async def test_an_unreachable_provider_is_a_clear_error(ctx: ToolContext) -> None:
    result = await searcher("http://127.0.0.1:9").execute({"query": "q"}, ctx)

    assert result.error is not None and result.error.startswith("tavily search failed:")


def test_no_provider_no_tool_and_a_provider_without_its_key_names_what_is_missing() -> None:
    assert web_search_tool(WebSearchSettings(), {"TAVILY_API_KEY": "k"}) is None
    with pytest.raises(ValueError, match=r"set tools\.webSearch\.apiKey or TAVILY_API_KEY"):
        web_search_tool(WebSearchSettings(provider="tavily"), {})
    with pytest.raises(ValueError, match="GOOGLE_SEARCH_ENGINE_ID"):
        web_search_tool(WebSearchSettings(provider="google"), {"GOOGLE_API_KEY": "k"})
    assert web_search_tool(WebSearchSettings(provider="tavily"), {"TAVILY_API_KEY": "k"})


def test_the_tool_asks_no_approval_and_a_deny_rule_names_it_as_claude_code_does(
    ctx: ToolContext, workspace: Path
) -> None:
    tool = web_search_tool(WebSearchSettings(provider="tavily", api_key="k"), {})

    assert tool is not None and tool.confirmation({"query": "q"}, ctx) is None
    match = PermissionRules.parse(deny=["WebSearch"]).match("web_search", {"query": "q"}, workspace)
    assert match is not None and match.decision == "deny"
