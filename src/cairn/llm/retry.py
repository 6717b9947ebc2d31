"""The retry policy for model requests: exponential backoff, jitter, ``Retry-After`` honoured."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.types import StreamEvent, StreamRetry

__all__ = [
    "INVALID_STREAM_DELAY",
    "INVALID_STREAM_RETRIES",
    "MAX_RETRY_AFTER",
    "RetryPolicy",
    "is_retryable_status",
    "retry_stream",
]

INVALID_STREAM_RETRIES = 2  # extra attempts for a dropped or empty stream
INVALID_STREAM_DELAY = 0.5  # seconds, times the attempt number
MAX_RETRY_AFTER = 300.0  # never wait longer than this on a server's Retry-After
_MAX_DOUBLINGS = 60  # beyond this the base is capped anyway; keeps 2**n a sane float


def is_retryable_status(status: int) -> bool:
    """429 and 5xx are worth another attempt; any other 4xx will fail the same way again."""
    return status == 429 or 500 <= status <= 599


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``initial_delay`` doubling up to ``max_delay``, ± ``jitter``."""

    max_attempts: int = 7
    initial_delay: float = 1.5
    max_delay: float = 30.0
    jitter: float = 0.3

    def delay(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, MAX_RETRY_AFTER)
        doublings = min(max(attempt, 1) - 1, _MAX_DOUBLINGS)
        base = min(self.initial_delay * 2**doublings, self.max_delay)
        spread = base * self.jitter
        return max(0.0, base + (rng or random).uniform(-spread, spread))


async def retry_stream(
    attempt: Callable[[], AsyncIterator[StreamEvent]],
    *,
    policy: RetryPolicy,
    max_attempts: int,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncGenerator[StreamEvent, None]:
    """Run ``attempt`` until one stream completes, retrying what is worth retrying.

    Two budgets: failed requests that produced nothing (HTTP 429/5xx, unreachable endpoint) get
    ``max_attempts`` tries with ``policy``'s backoff; a stream that broke (dropped, no finish
    reason, empty, or failing after output) gets :data:`INVALID_STREAM_RETRIES` more. A
    :class:`StreamRetry` event before each new attempt tells consumers to discard partial output.
    """
    http_failures = 0
    stream_failures = 0
    while True:
        produced = False
        try:
            async for event in attempt():
                produced = True
                yield event
            return
        except ProviderError as exc:
            if not exc.retryable or max_attempts == 1:
                raise
            if isinstance(exc, InvalidStreamError) or produced:
                if stream_failures >= INVALID_STREAM_RETRIES:
                    raise
                stream_failures += 1
                retry = StreamRetry(
                    stream_failures, INVALID_STREAM_DELAY * stream_failures, str(exc)
                )
            else:
                http_failures += 1
                if http_failures >= max_attempts:
                    raise
                retry = StreamRetry(
                    http_failures, policy.delay(http_failures, exc.retry_after), str(exc)
                )
        yield retry
        await sleep(retry.delay)
