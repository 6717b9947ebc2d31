"""The retry policy for model requests: exponential backoff, jitter, ``Retry-After`` honoured.

Three budgets, each counted on its own: failed requests that produced nothing (HTTP 429/5xx)
get ``max_attempts`` tries with backoff; a stream that broke (dropped, malformed, no finish
reason, empty, idle) gets :data:`INVALID_STREAM_RETRIES` more; an endpoint that cannot be
reached at all (connection refused, a name that does not resolve) gets one quick retry, since a
typo in the base URL will not fix itself. No retry starts once ``max_total_seconds`` have passed
since the first attempt, so a request fails in bounded time whatever the server says.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

from cairn.llm.errors import InvalidStreamError, ProviderError, UnreachableError
from cairn.llm.types import StreamEvent, StreamRetry
from cairn.values import Value

__all__ = [
    "INVALID_STREAM_DELAY",
    "INVALID_STREAM_RETRIES",
    "MAX_RETRY_AFTER",
    "MAX_TOTAL_RETRY_SECONDS",
    "UNREACHABLE_DELAY",
    "UNREACHABLE_RETRIES",
    "RetryPolicy",
    "is_retryable_status",
    "retry_stream",
]

INVALID_STREAM_RETRIES = 2  # extra attempts for a dropped or empty stream
INVALID_STREAM_DELAY = 0.5  # seconds, times the attempt number
MAX_RETRY_AFTER = 60.0  # never wait longer than this on a server's Retry-After
MAX_TOTAL_RETRY_SECONDS = 300.0  # no retry starts later than this after the first attempt
UNREACHABLE_RETRIES = 1  # extra attempts when the endpoint refuses connections or does not resolve
UNREACHABLE_DELAY = 0.5  # seconds before that one retry
_MAX_DOUBLINGS = 60  # beyond this the base is capped anyway; keeps 2**n a sane float


def is_retryable_status(status: int) -> bool:
    """429 and 5xx (529: overloaded) are worth another attempt; other 4xx fail the same way."""
    return status == 429 or 500 <= status <= 599


class RetryPolicy(Value):
    """Exponential backoff: ``initial_delay`` doubling up to ``max_delay``, ± ``jitter``."""

    max_attempts: int = 7
    initial_delay: float = 1.5
    max_delay: float = 30.0
    jitter: float = 0.3
    max_total_seconds: float = MAX_TOTAL_RETRY_SECONDS

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


class _Budgets(Value, frozen=False):
    policy: RetryPolicy
    max_attempts: int
    http: int = 0
    stream: int = 0
    unreachable: int = 0

    def next_retry(self, exc: ProviderError, produced: bool) -> StreamRetry | None:
        """The retry after ``exc``, or ``None`` when its budget is spent."""
        if isinstance(exc, UnreachableError):
            self.unreachable += 1
            limit = UNREACHABLE_RETRIES + 1
            if self.unreachable >= limit:
                return None
            return StreamRetry(self.unreachable + 1, UNREACHABLE_DELAY, str(exc), limit)
        if isinstance(exc, InvalidStreamError) or produced:
            self.stream += 1
            limit = INVALID_STREAM_RETRIES + 1
            if self.stream >= limit:
                return None
            delay = INVALID_STREAM_DELAY * self.stream
            return StreamRetry(self.stream + 1, delay, str(exc), limit)
        self.http += 1
        if self.http >= self.max_attempts:
            return None
        delay = self.policy.delay(self.http, exc.retry_after)
        return StreamRetry(self.http + 1, delay, str(exc), self.max_attempts)

    @property
    def failed(self) -> int:
        """Attempts made so far, all failed."""
        return self.http + self.stream + self.unreachable


async def retry_stream(
    attempt: Callable[[], AsyncIterator[StreamEvent]],
    *,
    policy: RetryPolicy,
    max_attempts: int,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncGenerator[StreamEvent, None]:
    """Run ``attempt`` until one stream completes, retrying what is worth retrying.

    A :class:`StreamRetry` event before each new attempt says which attempt of how many comes
    next and after how long, and tells consumers to discard partial output.
    """
    started = clock()
    budgets = _Budgets(policy, max_attempts)
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
            retry = budgets.next_retry(exc, produced)
            if retry is None:
                raise
            waited = clock() - started
            if waited + retry.delay > policy.max_total_seconds:
                raise _gave_up(exc, budgets.failed, waited) from exc
        yield retry
        await sleep(retry.delay)


def _gave_up(exc: ProviderError, attempts: int, waited: float) -> ProviderError:
    error = ProviderError(
        f"{exc} (gave up after {attempts} attempts in {waited:.0f} s)", status=exc.status
    )
    error.retry_after = exc.retry_after
    return error
