"""When the SDK sends a request again, and after how long.

A daemon being restarted, a replica shutting down or waiting for its database, a load balancer
with no replica up yet: each is over in seconds, and the request should simply go again. A
request is sent again only when that cannot do twice what it asks:

- it never reached a daemon (the connection was refused or timed out while connecting), or the
  daemon refused it before acting (``503`` with ``replica_draining``, ``database_unavailable``
  or ``session_busy``, or a load balancer's ``503`` with no daemon behind it);
- or the request is idempotent (reads, closing, loading, a prompt with its
  ``Idempotency-Key``, a session created with the id the client chose) and the connection broke
  before the answer came (a replica killed mid-request), or a load balancer answered ``502`` or
  ``504``.

The waits double from :data:`BACKOFF_SECONDS` up to :data:`MAX_DELAY_SECONDS`, or follow the
daemon's ``Retry-After`` up to :data:`MAX_RETRY_AFTER_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

__all__ = [
    "BACKOFF_SECONDS",
    "MAX_DELAY_SECONDS",
    "MAX_RETRY_AFTER_SECONDS",
    "RETRIES",
    "TRANSIENT_CODES",
    "resend_after_error",
    "resend_after_status",
    "retry_delay",
]

RETRIES = 5  # attempts after the first (about 8 s of waiting in all without Retry-After)
BACKOFF_SECONDS = 0.25  # the first wait; it doubles with each attempt
MAX_DELAY_SECONDS = 4.0  # the longest wait the backoff reaches
MAX_RETRY_AFTER_SECONDS = 10.0  # a daemon's Retry-After is followed up to this
# 503 codes a daemon answers before it acted: the same request succeeds shortly.
TRANSIENT_CODES = frozenset({"replica_draining", "database_unavailable", "session_busy"})
_GATEWAY = frozenset({502, 504})  # a load balancer's: the replica died or did not answer in time
_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout)  # the request never left
_BROKEN = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)  # it may have acted


def resend_after_error(error: httpx.TransportError, *, idempotent: bool) -> bool:
    """Whether a request that failed with ``error`` may go again."""
    return isinstance(error, _UNSENT) or (idempotent and isinstance(error, _BROKEN))


def resend_after_status(status: int, body: Any, *, idempotent: bool) -> bool:
    """Whether a request answered ``status`` (``body``: its JSON, if any) may go again."""
    if status == 503:
        code = body.get("code") if isinstance(body, Mapping) else None
        return code is None or code in TRANSIENT_CODES
    return idempotent and status in _GATEWAY


def retry_delay(attempt: int, retry_after: str | None = None) -> float:
    """Seconds to wait before attempt ``attempt`` (1 for the first retry)."""
    backoff = min(BACKOFF_SECONDS * 2 ** (attempt - 1), MAX_DELAY_SECONDS)
    return max(backoff, min(_seconds(retry_after), MAX_RETRY_AFTER_SECONDS))


def _seconds(value: str | None) -> float:
    """A ``Retry-After`` in seconds; 0 for none, an HTTP date (no daemon sends one) or junk."""
    try:
        seconds = float(value) if value is not None else 0.0
    except ValueError:
        return 0.0
    return seconds if 0.0 <= seconds < float("inf") else 0.0
