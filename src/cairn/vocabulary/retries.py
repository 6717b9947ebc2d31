"""How a retried model request is told to people, in every front end alike."""

from __future__ import annotations

__all__ = ["describe_retry"]


def describe_retry(delay: float, attempt: int, max_attempts: int, reason: str) -> str:
    """``retrying in 4 s (attempt 3 of 7): HTTP 500: overloaded``."""
    wait = f"{delay:.1f}" if 0 < delay < 1 else f"{delay:.0f}"
    count = f" (attempt {attempt} of {max_attempts})" if attempt and max_attempts else ""
    return f"retrying in {wait} s{count}" + (f": {reason}" if reason else "")
