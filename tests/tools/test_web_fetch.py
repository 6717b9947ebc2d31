"""web_fetch against real pages served on 127.0.0.1, with the scripted model answering the
side query."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cairn.testing import ScriptedProvider, reply
from cairn.tools.base import ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.web_fetch import MAX_BYTES, WEB_FETCH_PURPOSE, WebFetchTool, html_to_markdown

PAGE = """<!doctype html><html><head><title>Release notes</title>
<style>body { color: red }</style><script>alert("no")</script></head>
<body><nav>Home | Docs</nav><h2>Version 2.1</h2>
<p>Adds <code>--fast</code> and <a href="/docs">new docs</a>.</p>
<ul><li>faster start</li><li>smaller wheels</li></ul></body></html>"""

ROUTES: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/notes": (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE.encode()),
    "/moved": (302, {"Location": "/notes"}, b""),
    "/elsewhere": (302, {"Location": "http://localhost:1/x"}, b""),
    "/loop": (302, {"Location": "/loop"}, b""),
    "/image": (200, {"Content-Type": "image/png"}, b"\x89PNG"),
    "/missing": (404, {"Content-Type": "text/plain"}, b"no"),
    "/huge": (200, {"Content-Type": "text/plain"}, b"x" * (MAX_BYTES + 10)),
}


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return None  # the test's output stays the test's


class _Handler(QuietHandler):
    def do_GET(self) -> None:
        status, headers, body = ROUTES[self.path]
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 answering with ``handler``: its root URL, for a
    fixture to yield from (it stops when the fixture ends)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    yield from serve(_Handler)


def fetcher(provider: ScriptedProvider, *, private: bool = True) -> WebFetchTool:
    return WebFetchTool(provider, allow_private=private, session_id="s")


def test_html_becomes_markdown_without_scripts_styles_or_navigation() -> None:
    markdown = html_to_markdown(PAGE)

    assert markdown.startswith("# Release notes\n\n## Version 2.1")
    assert "Adds `--fast` and [new docs](/docs)." in markdown
    assert "- faster start\n- smaller wheels" in markdown
    assert (
        "alert" not in markdown and "color: red" not in markdown and "Home | Docs" not in markdown
    )


async def test_the_fast_model_answers_the_prompt_over_the_pages_markdown(
    site: str, ctx: ToolContext
) -> None:
    provider = ScriptedProvider(reply("2.1 adds --fast."))

    result = await fetcher(provider).execute(
        {"url": f"{site}/moved", "prompt": "What does 2.1 add?"}, ctx
    )

    assert result.error is None
    assert result.output == f"From {site}/notes:\n\n2.1 adds --fast."
    (asked,) = provider.requests
    assert asked.purpose == WEB_FETCH_PURPOSE
    question = asked.contents[-1].parts[0].text  # type: ignore[union-attr]
    assert "## Version 2.1" in question and question.rstrip().endswith("What does 2.1 add?")


async def test_a_redirect_to_another_host_is_told_not_followed(site: str, ctx: ToolContext) -> None:
    provider = ScriptedProvider(reply("unused"))

    result = await fetcher(provider).execute({"url": f"{site}/elsewhere", "prompt": "?"}, ctx)

    assert result.output is not None
    assert "redirects to another host: http://localhost:1/x" in result.output
    assert provider.requests == []


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/loop", "more than 5 redirects"),
        ("/image", "is image/png, not a page of text"),
        ("/missing", "answered HTTP 404"),
        ("/huge", "more than the 10 MB"),
    ],
)
async def test_what_cannot_be_read_is_a_clear_error(
    site: str, ctx: ToolContext, path: str, error: str
) -> None:
    result = await fetcher(ScriptedProvider(reply("unused"))).execute(
        {"url": f"{site}{path}", "prompt": "?"}, ctx
    )

    assert result.error is not None and error in result.error


async def test_loopback_and_private_addresses_are_refused_unless_allowed(
    site: str, ctx: ToolContext
) -> None:
    tool = fetcher(ScriptedProvider(reply("unused")), private=False)

    for url in (f"{site}/notes", "http://localhost:9/", "http://10.1.2.3/", "http://[::1]/"):
        result = await tool.execute({"url": url, "prompt": "?"}, ctx)
        assert result.error is not None and "private or local address" in result.error, url
    bad = await tool.execute({"url": "file:///etc/passwd", "prompt": "?"}, ctx)
    assert bad.error is not None and "is not an http(s) URL" in bad.error


def test_a_domain_rule_covers_that_host_only(workspace: Path) -> None:
    rules = PermissionRules.parse(
        allow=["WebFetch(domain:docs.python.org)", "WebFetch(domain:*.rs)"]
    )

    def allowed(url: str) -> bool:
        match = rules.match("web_fetch", {"url": url, "prompt": "?"}, workspace)
        return match is not None and match.decision == "allow"

    assert allowed("https://docs.python.org/3/library/")
    assert allowed("https://docs.rs/tokio")
    assert not allowed("https://python.org/")
    assert not allowed("https://docs.python.org.evil.example/")
