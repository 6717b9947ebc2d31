"""The backoff policy: 1.5 s doubling to 30 s, ±30 % jitter, Retry-After honoured and capped."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.llm.retry import RetryPolicy, is_retryable_status

EXACT = RetryPolicy(jitter=0.0)


def test_the_default_budget_is_seven_attempts() -> None:
    assert RetryPolicy().max_attempts == 7


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 1.5), (2, 3.0), (3, 6.0), (4, 12.0), (5, 24.0), (6, 30.0), (7, 30.0)],
)
def test_the_delay_doubles_from_1_5_seconds_up_to_30(attempt: int, expected: float) -> None:
    assert EXACT.delay(attempt) == expected


def test_a_huge_attempt_number_stays_at_the_cap() -> None:
    assert EXACT.delay(10_000) == 30.0


@given(attempt=st.integers(min_value=1, max_value=50), seed=st.integers())
def test_jitter_stays_within_30_percent_of_the_base(attempt: int, seed: int) -> None:
    base = EXACT.delay(attempt)

    delay = RetryPolicy().delay(attempt, rng=random.Random(seed))

    assert base * 0.7 <= delay <= base * 1.3


def test_jitter_spreads_the_delays() -> None:
    rng = random.Random(7)

    delays = {RetryPolicy().delay(3, rng=rng) for _ in range(20)}

    assert len(delays) > 1


def test_retry_after_is_used_as_is() -> None:
    assert RetryPolicy().delay(1, retry_after=4.0) == 4.0


def test_retry_after_zero_means_retry_at_once() -> None:
    assert RetryPolicy().delay(5, retry_after=0.0) == 0.0


def test_retry_after_is_capped_at_a_minute() -> None:
    """Regression (#18): Retry-After was honoured up to 300 s per attempt (~30 min in all)."""
    assert RetryPolicy().delay(1, retry_after=3600.0) == 60.0
    assert RetryPolicy().delay(1, retry_after=float("inf")) == 60.0


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 529, 599])
def test_rate_limits_and_server_errors_are_retryable(status: int) -> None:
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [200, 400, 401, 403, 404, 408, 413, 422, 600])
def test_other_statuses_are_not_retryable(status: int) -> None:
    assert not is_retryable_status(status)
