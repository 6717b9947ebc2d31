"""The provider for a resolved endpoint, configured from the settings."""

from __future__ import annotations

from typing import Any

from cairn.config.endpoint import Endpoint
from cairn.config.settings import Settings
from cairn.llm.proxies import proxy_routes
from cairn.llm.types import Provider

__all__ = ["create_provider"]


def create_provider(endpoint: Endpoint, settings: Settings, *, pools: int = 1) -> Provider:
    """A provider for ``endpoint``; its wire module (and httpx) is imported only here.

    ``pools`` > 1 spreads the sessions' requests over that many HTTP connection pools (for many
    concurrent sessions).
    """
    generation = settings.model.generation_config
    options: dict[str, Any] = {
        "base_url": endpoint.base_url,
        "api_key": endpoint.api_key,
        "model": endpoint.model,
        "fast_model": endpoint.fast_model,
        "timeout": generation.timeout,
        "attempt_deadline": generation.request_deadline,
        "pools": pools,
        "base_url_setting": endpoint.base_url_source,
        "key_setting": endpoint.key_source,
        "model_setting": endpoint.model_source,
        "structured_output": settings.model.structured_output,
        "supports_images": settings.model.supports_images,
        "prompt_caching": settings.model.prompt_caching,
        "output_limits": generation.max_output_tokens.by_kind(),
        "proxies": proxy_routes(settings.proxy, settings.env),
    }
    if endpoint.wire == "anthropic":
        from cairn.llm.anthropic import AnthropicProvider

        return AnthropicProvider(
            thinking_budget=generation.thinking_budget, bearer=endpoint.bearer, **options
        )
    from cairn.llm.openai import OpenAIProvider

    return OpenAIProvider(**options)
