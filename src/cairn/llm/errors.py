"""Errors raised by model providers."""

from __future__ import annotations

__all__ = ["InvalidStreamError", "ProviderError"]


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
    """The stream ended without a finish reason (dropped) or carried nothing usable."""

    def __init__(self, message: str, *, kind: str):
        super().__init__(message, retryable=True)
        self.kind = kind  # "no_finish_reason" | "no_response" | "dropped"
