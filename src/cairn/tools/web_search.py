"""``web_search``: search the web through the provider the user configured.

Registered only when ``tools.webSearch.provider`` is set (Qwen Code's providers, minus its
account-bound DashScope one): ``tavily`` (``POST /search``, key in ``apiKey`` or
``TAVILY_API_KEY``) or ``google`` (Programmable Search's JSON API, ``GET /customsearch/v1``, key
in ``apiKey`` or ``GOOGLE_API_KEY`` and engine id in ``searchEngineId`` or
``GOOGLE_SEARCH_ENGINE_ID``). The model gets a numbered list of title, URL and snippet, to read
further with ``web_fetch``.

It asks no approval, as Qwen Code's: it reads nothing of the user's, the query goes only to the
provider the user configured in their own settings (a project file naming a ``baseUrl`` needs
the folder trusted, see :mod:`cairn.config.trust`), and it changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.config.settings import WEB_SEARCH_KEY_VARIABLES
from cairn.tools.arguments import require_str
from cairn.tools.base import ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.tools.schema import object_schema, string_property
from cairn.tools.web_fetch import TIMEOUT_SECONDS, http_client
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.config.settings import WebSearchSettings

__all__ = ["MAX_SNIPPET_CHARS", "SearchHit", "WebSearchTool", "format_hits", "web_search_tool"]

MAX_SNIPPET_CHARS = 500  # of each result's snippet given to the model
MAX_ERROR_CHARS = 300  # of a provider's error body quoted in the tool error
GOOGLE_MAX_RESULTS = 10  # the most Programmable Search returns per request
_BASE_URLS = {"tavily": "https://api.tavily.com", "google": "https://www.googleapis.com"}
_ENGINE_VARIABLE = "GOOGLE_SEARCH_ENGINE_ID"

_PARAMETERS = object_schema(
    {"query": string_property("What to search the web for.")}, required=["query"]
)


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class _Provider:
    name: str  # "tavily" | "google"
    api_key: str
    search_engine_id: str
    base_url: str
    max_results: int


class WebSearchTool(BuiltinTool):
    name = ToolName.WEB_SEARCH
    description = (
        "Search the web. Returns a numbered list of results (title, URL, snippet). Use it for "
        "facts that may be newer than your knowledge: releases, documentation, error messages. "
        "Read a result in full with web_fetch. Cite the URLs you use."
    )
    parameters = _PARAMETERS
    kind = ToolKind.SEARCH

    def __init__(self, provider: _Provider) -> None:
        self._provider = provider

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Search the web for {args.get('query', '')!r}"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        query = require_str(args, "query").strip()
        if not query:
            raise ToolError("query is empty")
        hits = await self._search(query)
        output = format_hits(query, hits)
        name = self._provider.name
        return ToolResult(output=output, display=f"{len(hits)} results from {name} for {query!r}")

    async def _search(self, query: str) -> list[SearchHit]:
        import httpx  # only when a search runs

        p = self._provider
        async with http_client("cairn-web-search", accept="application/json") as client:
            try:
                if p.name == "tavily":
                    response = await client.post(
                        f"{p.base_url}/search",
                        json={"query": query, "max_results": p.max_results},
                        headers={"Authorization": f"Bearer {p.api_key}"},
                    )
                else:
                    response = await client.get(
                        f"{p.base_url}/customsearch/v1",
                        params={
                            "key": p.api_key,
                            "cx": p.search_engine_id,
                            "q": query,
                            "num": str(min(p.max_results, GOOGLE_MAX_RESULTS)),
                        },
                    )
            except httpx.TimeoutException:
                raise ToolError(f"{p.name} did not answer within {TIMEOUT_SECONDS:g} s") from None
            except httpx.HTTPError as exc:
                raise ToolError(f"{p.name} search failed: {exc}") from None
        if response.status_code >= 400:
            body = " ".join(response.text.split())[:MAX_ERROR_CHARS]
            raise ToolError(f"{p.name} search answered HTTP {response.status_code}: {body}")
        try:
            data = response.json()
        except ValueError:
            raise ToolError(f"{p.name} search answered something that is not JSON") from None
        return _hits(p.name, data)[: p.max_results]


def _hits(provider: str, data: Any) -> list[SearchHit]:
    """The results in a provider's answer (Tavily's ``results``, Google's ``items``)."""
    field, url_key, snippet_key = (
        ("results", "url", "content") if provider == "tavily" else ("items", "link", "snippet")
    )
    if not isinstance(data, Mapping):
        raise ToolError(f"{provider} search answered JSON that is not an object")
    items = data.get(field, [])  # Google omits "items" when nothing matches
    if not isinstance(items, list):
        raise ToolError(f"{provider} search answered {field!r} that is not a list")
    hits = []
    for item in items:
        url = item.get(url_key) if isinstance(item, Mapping) else None
        if not isinstance(url, str) or not url:
            continue  # a result without a link cannot be cited or fetched
        title, snippet = item.get("title"), item.get(snippet_key)
        hits.append(
            SearchHit(
                title=" ".join(title.split()) if isinstance(title, str) and title else url,
                url=url,
                snippet=" ".join(snippet.split()) if isinstance(snippet, str) else "",
            )
        )
    return hits


def format_hits(query: str, hits: list[SearchHit]) -> str:
    """What the model reads: a numbered list of title, URL and (clipped) snippet."""
    if not hits:
        return f"No web results for {query!r}."
    lines = [f"Web results for {query!r}:", ""]
    for number, hit in enumerate(hits, 1):
        lines.append(f"{number}. {hit.title}")
        lines.append(f"   {hit.url}")
        if hit.snippet:
            snippet = hit.snippet
            if len(snippet) > MAX_SNIPPET_CHARS:
                snippet = snippet[:MAX_SNIPPET_CHARS].rstrip() + "…"
            lines.append(f"   {snippet}")
    return "\n".join(lines)


def web_search_tool(
    settings: WebSearchSettings, environ: Mapping[str, str] | None = None
) -> WebSearchTool | None:
    """The tool for these settings, or None when no provider is configured.

    Raises :class:`ValueError` naming what is missing when a provider is set without its key
    (or Google without its engine id)."""
    name = settings.provider
    if name is None:
        return None
    env = os.environ if environ is None else environ
    api_key = settings.key(env)
    if not api_key:
        raise ValueError(
            f"tools.webSearch.provider is {name!r} but it has no key: set tools.webSearch.apiKey "
            f"or {WEB_SEARCH_KEY_VARIABLES[name]}"
        )
    engine = settings.search_engine_id or env.get(_ENGINE_VARIABLE, "")
    if name == "google" and not engine:
        raise ValueError(
            "tools.webSearch.provider is 'google' but it has no engine id: set "
            f"tools.webSearch.searchEngineId or {_ENGINE_VARIABLE}"
        )
    base_url = (settings.base_url or _BASE_URLS[name]).rstrip("/")
    return WebSearchTool(_Provider(name, api_key, engine, base_url, settings.max_results))
