"""The OpenAI-compatible chat-completions provider (httpx + httpx-sse).

It sends the body :mod:`cairn.llm.openai.format` builds and reads the answer with
:class:`~cairn.llm.openai.stream.ChunkParser`; sending, retries and timeouts are
:class:`~cairn.llm.http_provider.HttpProvider`'s.
"""

from __future__ import annotations

from typing import Any

from cairn.llm.caching import extra_cache_headers, marks_cache
from cairn.llm.http_provider import PURPOSE_HEADER, SESSION_HEADER, HttpProvider, StreamParser
from cairn.llm.openai.format import WireOptions, build_request_body
from cairn.llm.openai.stream import ChunkParser, parse_completion
from cairn.llm.structured import Strategy
from cairn.llm.types import ModelRequest, StreamEvent

__all__ = ["PURPOSE_HEADER", "SESSION_HEADER", "OpenAIProvider"]


class OpenAIProvider(HttpProvider):
    """A provider for any endpoint that speaks OpenAI chat completions."""

    default_base_url_setting = "OPENAI_BASE_URL or security.auth.baseUrl"

    def endpoint_url(self) -> str:
        return self._base_url + "/chat/completions"

    def request_headers(self, request: ModelRequest) -> dict[str, str]:
        return extra_cache_headers(self._base_url) if self._marks_cache(request) else {}

    def build_body(self, request: ModelRequest, strategy: Strategy) -> dict[str, Any]:
        cache = self._marks_cache(request)
        options = WireOptions(structured=strategy, images=self._images, cache=cache)
        return build_request_body(request, options)

    def new_parser(self) -> StreamParser:
        return ChunkParser()

    def parse_body(self, raw: bytes) -> list[StreamEvent]:
        return parse_completion(raw)

    def _marks_cache(self, request: ModelRequest) -> bool:
        return marks_cache(self._caching, self._base_url, request.model)
