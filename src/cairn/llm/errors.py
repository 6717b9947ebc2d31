"""Errors raised by model providers."""

from __future__ import annotations

__all__ = [
    "ContextOverflowError",
    "InvalidStreamError",
    "ProviderError",
    "ProxyError",
    "UnreachableError",
]


class ProviderError(Exception):
    """The model endpoint failed. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after: float | None = None

    @property
    def message(self) -> str:
        return str(self)


class InvalidStreamError(ProviderError):
    """The answer arrived but cannot be used; retried on its own small budget.

    ``kind``: ``dropped`` (cut off), ``no_finish_reason``, ``no_response`` (empty),
    ``malformed`` (a chunk of the wrong shape) or ``idle`` (nothing arrived for too long).
    """

    def __init__(self, message: str, *, kind: str):
        super().__init__(message, retryable=True)
        self.kind = kind


class UnreachableError(ProviderError):
    """No connection could be made (refused, or the host name does not resolve).

    Retried once, quickly: this is usually a wrong base URL, which waiting does not fix.
    """

    def __init__(self, message: str):
        super().__init__(message, retryable=True)


class ProxyError(ProviderError):
    """The HTTP proxy in front of the endpoint is misconfigured, or refused to carry a request
    (:mod:`cairn.llm.proxies`). ``status`` is the proxy's own HTTP status when it answered one;
    the message names the proxy, never its credentials."""


class ContextOverflowError(ProviderError):
    """The endpoint refused the prompt as too long for the model's context window.

    ``window`` is the window the server named (llama.cpp's ``n_ctx``, OpenAI's "maximum context
    length is N tokens") and ``prompt_tokens`` the prompt's size it counted, each ``None`` when
    the refusal did not say. Not retried as it is: the conversation must be compressed first.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        window: int | None = None,
        prompt_tokens: int | None = None,
    ):
        super().__init__(message, status=status)
        self.window = window
        self.prompt_tokens = prompt_tokens
