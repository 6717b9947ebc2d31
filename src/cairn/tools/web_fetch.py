"""``web_fetch``: read a web page and have the fast model answer a question about it.

The tool GETs an http(s) URL (at most :data:`MAX_REDIRECTS` redirects, all on the same host: a
redirect to another host is reported to the model, which may fetch that URL in a call of its own,
so an approval for one domain never covers another), reads at most :data:`MAX_BYTES`, turns HTML
into Markdown (``markdownify`` over a BeautifulSoup tree with scripts, styles and navigation
removed: markdownify keeps tables, lists, links and code blocks, which html2text flattens less
predictably, and it is the converter ARCHITECTURE.md chose), then asks the fast model the call's
``prompt`` over the page as a side query (``X-Cairn-Purpose: web-fetch``). The answer is the
result; when the side query fails the model gets the start of the page itself.

Every call asks for approval (as information, per domain: "allow always" remembers the host)
unless ``permissions.allow`` has ``WebFetch(domain:docs.python.org)``. A URL whose host resolves
to a private, loopback, link-local, multicast or otherwise non-public address is refused unless
``tools.webFetch.allowPrivateAddresses`` is set; the check is made by the connection itself, on
the addresses it then connects to (:mod:`cairn.tools.web_address`).

A call's fetch (resolving, connecting, redirects, reading) ends within
:data:`FETCH_DEADLINE_SECONDS` in all, however slowly a server sends; HTML nested deeper than
:data:`MAX_HTML_DEPTH` keeps only the text of what lies deeper, rather than overflowing the
converter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from cairn.tools.arguments import require_str
from cairn.tools.base import ConfirmationKind, ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.tools.schema import object_schema, string_property
from cairn.values import Value
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    import httpcore
    import httpx
    from bs4 import Tag

    from cairn.llm.types import Provider
    from cairn.tools.web_address import Resolver

__all__ = [
    "FETCH_DEADLINE_SECONDS",
    "MAX_BYTES",
    "MAX_HTML_DEPTH",
    "MAX_REDIRECTS",
    "WEB_FETCH_PURPOSE",
    "WebFetchTool",
    "html_to_markdown",
    "http_client",
]

WEB_FETCH_PURPOSE = "web-fetch"  # X-Cairn-Purpose of the question asked over the page
MAX_BYTES = 10 * 1024 * 1024  # of a response body read
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 30.0  # of each connect, write or read of the web tools
FETCH_DEADLINE_SECONDS = 30.0  # of a web_fetch call's whole fetch, however slowly a page comes
MAX_HTML_DEPTH = 200  # nesting the Markdown converter gets (it recurses per level); deeper: text
MAX_PAGE_CHARS = 100_000  # of Markdown given to the fast model
MAX_FALLBACK_CHARS = 20_000  # of Markdown returned when the side query fails
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")
_DROPPED_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "nav", "footer")
_SYSTEM = (
    "You answer a question about one web page, using only the page's content given to you. "
    "Be concise and specific; quote exact names, versions, code and numbers from the page. If "
    "the page does not answer the question, say so."
)

_PARAMETERS = object_schema(
    {
        "url": string_property("The http(s) URL of the page to read."),
        "prompt": string_property(
            "What you want to know from the page (it is answered over the page)."
        ),
    },
    required=["url", "prompt"],
)


class _Page(Value):
    url: str
    content_type: str
    text: str
    truncated: bool


class WebFetchTool(BuiltinTool):
    name = ToolName.WEB_FETCH
    description = (
        "Fetch a web page (http or https) and get an answer to a question about it: the page is "
        "turned into Markdown and a model answers your prompt using only its content. Use it for "
        "documentation, release notes, issues and other pages the user points to. The user "
        "approves each domain. Write a specific prompt (what to extract)."
    )
    parameters = _PARAMETERS
    kind = ToolKind.FETCH

    def __init__(
        self,
        provider: Provider,
        *,
        allow_private: bool = False,
        session_id: str = "",
        resolver: Resolver | None = None,
        deadline: float = FETCH_DEADLINE_SECONDS,
    ) -> None:
        self._provider = provider
        self._allow_private = allow_private
        self._session_id = session_id
        self._resolver = resolver  # None: the system's (tests give names their addresses)
        self._deadline = deadline

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Fetch {args.get('url', '')}".strip()

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        return "info"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        url = _checked_url(require_str(args, "url").strip())
        prompt = require_str(args, "prompt")
        page = await self._fetch(url)
        if isinstance(page, str):
            return ToolResult(output=page, display=page)
        markdown = page.text
        if "html" in page.content_type:
            markdown = await asyncio.to_thread(html_to_markdown, page.text)
        answer = await self._answer(page.url, markdown, prompt)
        note = " (the page was cut at 10 MB)" if page.truncated else ""
        display = f"Fetched {page.url}{note}: {len(markdown)} characters of Markdown"
        return ToolResult(output=answer, display=display)

    async def _fetch(self, url: str) -> _Page | str:
        """The page, or a message for the model (a redirect to another host), within the
        call's deadline."""
        try:
            async with asyncio.timeout(self._deadline):
                return await self._follow(url)
        except TimeoutError:
            raise ToolError(
                f"{url} was not fetched within {self._deadline:g} s (web_fetch's limit for a "
                "page, however slowly it comes)"
            ) from None

    async def _follow(self, url: str) -> _Page | str:
        import httpx  # only when a page is fetched

        from cairn.tools.web_address import CheckedNetworkBackend, system_resolver

        backend = CheckedNetworkBackend(
            self._resolver or system_resolver, allow_private=self._allow_private
        )
        accept = "text/html, text/*;q=0.9, */*;q=0.5"
        async with http_client("cairn-web-fetch", accept=accept, backend=backend) as client:
            for _ in range(MAX_REDIRECTS + 1):
                try:
                    async with client.stream("GET", url) as response:
                        if response.is_redirect and "location" in response.headers:
                            target = _checked_url(urljoin(url, response.headers["location"]))
                            if urlsplit(target).hostname != urlsplit(url).hostname:
                                return (
                                    f"{url} redirects to another host: {target}. To read it, "
                                    "call web_fetch again with that URL."
                                )
                            url = target
                            continue
                        if response.status_code >= 400:
                            raise ToolError(f"{url} answered HTTP {response.status_code}")
                        return await _read(url, response)
                except httpx.TimeoutException:
                    raise ToolError(f"{url} did not answer within {TIMEOUT_SECONDS:g} s") from None
                except httpx.HTTPError as exc:
                    raise ToolError(f"{url} could not be fetched: {exc}") from None
        raise ToolError(f"{url}: more than {MAX_REDIRECTS} redirects")

    async def _answer(self, url: str, markdown: str, prompt: str) -> str:
        from cairn.content import Content, Text
        from cairn.llm.errors import ProviderError
        from cairn.llm.side_query import side_query

        page = markdown[:MAX_PAGE_CHARS]
        cut = "\n\n(The page continues; this is its start.)" if len(markdown) > len(page) else ""
        question = f"Content of {url}:\n\n---\n{page}{cut}\n---\n\n{prompt}"
        try:
            result = await side_query(
                self._provider,
                purpose=WEB_FETCH_PURPOSE,
                system=_SYSTEM,
                messages=[Content("user", [Text(question)])],
                session_id=self._session_id or None,
            )
        except ProviderError as exc:
            excerpt = markdown[:MAX_FALLBACK_CHARS]
            return f"(No answer over the page: {exc}. The page from {url} follows.)\n\n{excerpt}"
        cut = ""
        if result.finish_reason == "length":
            cut = (
                "\n\n(The answer was cut at its output bound: "
                "model.generationConfig.maxOutputTokens.web-fetch.)"
            )
        return f"From {url}:\n\n{result.text or '(no answer)'}{cut}"


def http_client(
    user_agent: str, *, accept: str, backend: httpcore.AsyncNetworkBackend | None = None
) -> httpx.AsyncClient:
    """The client of cairn's web tools: their time limit, no proxy or netrc from the
    environment (what a tool reaches does not depend on the shell it was started from);
    ``backend`` opens its sockets (web_fetch's checks each address it connects to)."""
    import httpx

    headers = {"User-Agent": user_agent, "Accept": accept}
    timeout = httpx.Timeout(TIMEOUT_SECONDS)
    transport = None
    if backend is not None:
        from cairn.tools.web_address import checked_transport

        transport = checked_transport(backend)
    return httpx.AsyncClient(timeout=timeout, trust_env=False, headers=headers, transport=transport)


def _checked_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"{url!r} is not an http(s) URL")
    return url


async def _read(url: str, response: Any) -> _Page:
    content_type = response.headers.get("content-type", "text/html").split(";")[0].strip().lower()
    if not content_type.startswith(_TEXT_TYPES):
        raise ToolError(f"{url} is {content_type}, not a page of text")
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BYTES:
        raise ToolError(f"{url} is {int(declared) >> 20} MB, more than the 10 MB web_fetch reads")
    body = bytearray()
    truncated = False
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_BYTES:
            del body[MAX_BYTES:]
            truncated = True
            break
    encoding = response.charset_encoding or "utf-8"
    try:
        text = bytes(body).decode(encoding, errors="replace")
    except LookupError:  # a charset Python does not know
        text = bytes(body).decode("utf-8", errors="replace")
    return _Page(str(response.url), content_type, text, truncated)


def html_to_markdown(html: str) -> str:
    """The page's content as Markdown: scripts, styles and navigation dropped."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(_DROPPED_TAGS):
        tag.decompose()
    root = soup.body or soup
    for deepest in _nesting_below(root, MAX_HTML_DEPTH):
        text = deepest.get_text()  # what is nested deeper stays, as plain text
        deepest.clear()
        deepest.append(text)
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(root)
    lines = [line.rstrip() for line in markdown.splitlines()]
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    title = soup.title.get_text(strip=True) if soup.title else ""
    body = text.strip()
    return f"# {title}\n\n{body}" if title and not body.startswith("# ") else body


def _nesting_below(root: Tag, limit: int) -> list[Tag]:
    """The elements ``limit`` levels below ``root`` that hold more elements (found without
    recursion: a page can nest tens of thousands of levels)."""
    from bs4 import Tag

    found: list[Tag] = []
    stack: list[tuple[Tag, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        children = [child for child in node.contents if isinstance(child, Tag)]
        if depth == limit:
            if children:
                found.append(node)
            continue
        stack.extend((child, depth + 1) for child in children)
    return found
