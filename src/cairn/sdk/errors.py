"""Typed errors of the daemon SDK. Every HTTP error carries the status and the daemon's code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "DaemonConnectionError",
    "DaemonError",
    "DaemonHTTPError",
    "FeatureNotSupported",
    "ForbiddenError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PromptQueueFullError",
    "SessionLimitError",
    "TurnError",
    "UnauthorizedError",
    "UnavailableError",
    "http_error",
]


class DaemonError(Exception):
    """Base class of every error the SDK raises."""


class DaemonConnectionError(DaemonError):
    """The daemon could not be reached, or the connection broke."""


class FeatureNotSupported(DaemonError):
    """The daemon's ``/capabilities`` does not list a feature this call needs."""

    def __init__(self, feature: str) -> None:
        super().__init__(f"the daemon does not support {feature!r} (not in /capabilities features)")
        self.feature = feature


class TurnError(DaemonError):
    """A prompt's turn ended with ``turn_error`` (the model failed, or the session closed)."""

    def __init__(self, message: str, *, code: str | None, prompt_id: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.prompt_id = prompt_id


class DaemonHTTPError(DaemonError):
    """The daemon answered with an error status; ``code`` is its machine-readable reason."""

    def __init__(self, status: int, message: str, code: str | None, body: Mapping[str, Any]):
        super().__init__(f"HTTP {status}: {message}" + (f" ({code})" if code else ""))
        self.status = status
        self.message = message
        self.code = code
        self.body = dict(body)
        self.retry_after: str | None = None  # the answer's Retry-After header, if any


class UnauthorizedError(DaemonHTTPError):
    """401: a missing or wrong token, or ``token_required`` on a strict route."""


class ForbiddenError(DaemonHTTPError):
    """403: a refused ``Origin`` or ``Host``."""


class NotFoundError(DaemonHTTPError):
    """404: no such session (or permission request, or route)."""


class PayloadTooLargeError(DaemonHTTPError):
    """413: the request body is over the daemon's limit."""


class PromptQueueFullError(DaemonHTTPError):
    """429: the session already holds as many prompts as it admits."""


class UnavailableError(DaemonHTTPError):
    """503: the daemon cannot serve the request now (a replica shutting down, its database
    unreachable, a load balancer without a replica); ``code`` says which. Raised once the
    client's retries are spent."""


class SessionLimitError(UnavailableError):
    """503 ``session_limit_exceeded``: the daemon runs as many sessions as it may."""


_BY_STATUS: dict[int, type[DaemonHTTPError]] = {
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    413: PayloadTooLargeError,
    429: PromptQueueFullError,
    503: UnavailableError,
}


def http_error(status: int, body: Any) -> DaemonHTTPError:
    """The typed error for an error response (``body`` is its parsed JSON, if any)."""
    mapping = body if isinstance(body, Mapping) else {}
    message = mapping.get("error")
    code = mapping.get("code")
    cls = _BY_STATUS.get(status, DaemonHTTPError)
    if code == "session_limit_exceeded":
        cls = SessionLimitError
    return cls(
        status,
        message if isinstance(message, str) else f"the daemon answered {status}",
        code if isinstance(code, str) else None,
        mapping,
    )
