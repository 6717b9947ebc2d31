"""The OpenAI-compatible chat-completions provider (httpx + httpx-sse).

It sends the body :mod:`cairn.llm.openai.format` builds and reads the answer with
:class:`~cairn.llm.openai.stream.ChunkParser`; sending, retries and timeouts are
:class:`~cairn.llm.http_provider.HttpProvider`'s.
"""

from __future__ import annotations

from typing import Any

from cairn.llm.caching import extra_cache_headers, marks_cache
from cairn.llm.errors import ProviderError
from cairn.llm.http_provider import PURPOSE_HEADER, SESSION_HEADER, HttpProvider, StreamParser
from cairn.llm.openai.format import WireOptions, build_request_body
from cairn.llm.openai.stream import ChunkParser, parse_completion
from cairn.llm.structured import Strategy
from cairn.llm.types import ModelRequest, StreamEvent

__all__ = ["COMPLETION_TOKENS_FIELD", "PURPOSE_HEADER", "SESSION_HEADER", "OpenAIProvider"]

# OpenAI's reasoning models refuse `max_tokens` ("Use 'max_completion_tokens' instead").
COMPLETION_TOKENS_FIELD = "max_completion_tokens"


class OpenAIProvider(HttpProvider):
    """A provider for any endpoint that speaks OpenAI chat completions.

    A model that refuses ``max_tokens`` gets its bound as ``max_completion_tokens`` from then on.
    """

    default_base_url_setting = "OPENAI_BASE_URL or security.auth.baseUrl"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._completion_tokens: set[str] = set()  # models that take max_completion_tokens

    def endpoint_url(self) -> str:
        return self._base_url + "/chat/completions"

    def request_headers(self, request: ModelRequest) -> dict[str, str]:
        return extra_cache_headers(self._base_url) if self._marks_cache(request) else {}

    def build_body(self, request: ModelRequest, strategy: Strategy) -> dict[str, Any]:
        cache = self._marks_cache(request)
        field = "max_tokens"
        if request.model in self._completion_tokens:
            field = COMPLETION_TOKENS_FIELD
        options = WireOptions(
            structured=strategy, images=self._images, cache=cache, output_field=field
        )
        return build_request_body(request, options)

    def rephrased(self, error: ProviderError, request: ModelRequest) -> bool:
        """``max_completion_tokens`` after a 400 refusing ``max_tokens`` (remembered)."""
        message = str(error).lower()
        if error.status != 400 or request.model in self._completion_tokens:
            return False
        if "max_tokens" not in message or "too large" in message:  # vLLM: the bound's size
            return False
        if f"use '{COMPLETION_TOKENS_FIELD}'" not in message and "unsupported" not in message:
            return False
        self._completion_tokens.add(request.model)
        return True

    def new_parser(self) -> StreamParser:
        return ChunkParser()

    def parse_body(self, raw: bytes) -> list[StreamEvent]:
        return parse_completion(raw)

    def _marks_cache(self, request: ModelRequest) -> bool:
        return marks_cache(self._caching, self._base_url, request.model)
