"""The native Anthropic Messages provider, on httpx (no vendor SDK).

It sends the body :mod:`cairn.llm.anthropic.format` builds and reads the event stream with
:class:`~cairn.llm.anthropic.stream.EventParser`; sending, retries (429, 529 and 5xx, with
``retry-after``) and timeouts are :class:`~cairn.llm.http_provider.HttpProvider`'s, the same as
for the OpenAI wire. JSON side queries are asked with a forced ``respond_in_schema`` tool.
"""

from __future__ import annotations

from typing import Any

from cairn.llm.anthropic.format import API_VERSION, AnthropicOptions, build_request_body
from cairn.llm.anthropic.stream import EventParser, parse_message
from cairn.llm.http_provider import HttpProvider, StreamParser
from cairn.llm.structured import Strategy
from cairn.llm.types import ModelRequest, StreamEvent

__all__ = ["DEFAULT_ANTHROPIC_BASE_URL", "AnthropicProvider"]

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"


class AnthropicProvider(HttpProvider):
    """A provider for the Anthropic Messages API (``/v1/messages``).

    ``bearer`` sends the key as ``Authorization: Bearer`` (``ANTHROPIC_AUTH_TOKEN``, for
    gateways) instead of ``x-api-key``. ``thinking_budget`` turns extended thinking on for the
    conversation's requests (never for side queries); ``prompt_caching`` ``off`` sends no cache
    breakpoints (``auto`` and ``on`` send them: the API honours them).
    """

    default_base_url_setting = "ANTHROPIC_BASE_URL or security.auth.baseUrl"

    def __init__(
        self, *, thinking_budget: int | None = None, bearer: bool = False, **options: Any
    ) -> None:
        super().__init__(**options)
        self._thinking = thinking_budget
        self._bearer = bearer
        # The base URL is the API root, with or without the version segment.
        self._root = self._base_url.removesuffix("/v1")

    def endpoint_url(self) -> str:
        return self._root + "/v1/messages"

    def models_url(self) -> str:
        return self._root + "/v1/models"

    def auth_headers(self) -> dict[str, str]:
        key = (
            {"Authorization": f"Bearer {self._api_key}"}
            if self._bearer
            else {"x-api-key": self._api_key}
        )
        return {**key, "anthropic-version": API_VERSION}

    def build_body(self, request: ModelRequest, strategy: Strategy) -> dict[str, Any]:
        options = AnthropicOptions(
            structured=strategy,
            images=self._images,
            cache=self._caching != "off",
            thinking_budget=self._thinking,
        )
        return build_request_body(request, options)

    def first_strategy(self, request: ModelRequest) -> Strategy:
        """The Messages API has no ``response_format``: a forced tool unless told ``prompt``."""
        return "prompt" if self._structured == "prompt" else "tool"

    def new_parser(self) -> StreamParser:
        return EventParser()

    def parse_body(self, raw: bytes) -> list[StreamEvent]:
        return parse_message(raw)
