"""Prompt caching on the OpenAI-compatible wire: which endpoints get ``cache_control`` marks.

Every agent request repeats a long, stable prefix (system prompt, tool declarations, the
conversation so far). Some endpoints cache a prefix the request marks with
``cache_control: {"type": "ephemeral"}`` and bill it at a fraction of the price: DashScope does
(as the reference system marks it), and OpenRouter forwards the marks to Anthropic's models.
Other endpoints may reject a mark they do not know, so ``model.promptCaching: auto`` marks
requests for those known hosts only; ``on`` marks them everywhere, ``off`` nowhere. Endpoints
that cache on their own (OpenAI, DeepSeek) need no marks; their cached-token counts are read
either way.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["CACHING_MODES", "DASHSCOPE_HOSTS", "extra_cache_headers", "marks_cache"]

CACHING_MODES = ("auto", "on", "off")  # the values of model.promptCaching
DASHSCOPE_HOSTS = (
    "dashscope.aliyuncs.com",
    "dashscope-intl.aliyuncs.com",
    "dashscope-us.aliyuncs.com",
)
OPENROUTER_HOSTS = ("openrouter.ai",)
_OPENROUTER_CACHING_MODELS = ("anthropic/", "claude")  # model names OpenRouter caches by marks


def marks_cache(setting: str, base_url: str, model: str) -> bool:
    """Whether requests to ``base_url`` for ``model`` carry ``cache_control`` marks."""
    if setting in ("on", "off"):
        return setting == "on"
    host = _host(base_url)
    if _is_dashscope(host):
        return True
    if _within(host, OPENROUTER_HOSTS):
        return any(marker in model.lower() for marker in _OPENROUTER_CACHING_MODELS)
    return False


def extra_cache_headers(base_url: str) -> dict[str, str]:
    """Headers an endpoint wants besides the marks (DashScope's switch, as the reference sends)."""
    return {"X-DashScope-CacheControl": "enable"} if _is_dashscope(_host(base_url)) else {}


def _is_dashscope(host: str) -> bool:
    if _within(host, DASHSCOPE_HOSTS):
        return True
    return host.startswith("token-plan.") and host.endswith(".maas.aliyuncs.com")


def _within(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == domain or host.endswith("." + domain) for domain in domains)


def _host(base_url: str) -> str:
    try:
        return (urlsplit(base_url).hostname or "").lower()
    except ValueError:
        return ""
