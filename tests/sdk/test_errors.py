"""Typed HTTP errors carry the status and the daemon's code."""

from __future__ import annotations

import pytest

from cairn.sdk import (
    DaemonHTTPError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    PromptQueueFullError,
    SessionLimitError,
    UnauthorizedError,
    UnavailableError,
)
from cairn.sdk.errors import http_error


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, UnauthorizedError),
        (403, ForbiddenError),
        (404, NotFoundError),
        (413, PayloadTooLargeError),
        (429, PromptQueueFullError),
        (503, UnavailableError),
        (500, DaemonHTTPError),
        (418, DaemonHTTPError),
    ],
)
def test_each_status_has_its_error_type(status: int, cls: type[DaemonHTTPError]) -> None:
    error = http_error(status, {"error": "nope", "code": "some_code"})

    assert type(error) is cls
    assert (error.status, error.code, error.message) == (status, "some_code", "nope")
    assert str(error) == f"HTTP {status}: nope (some_code)"


def test_a_503_for_the_session_limit_is_a_session_limit_error() -> None:
    error = http_error(503, {"error": "Session limit reached", "code": "session_limit_exceeded"})

    assert type(error) is SessionLimitError
    assert isinstance(error, UnavailableError)


def test_a_body_that_is_not_an_envelope_still_gives_a_message() -> None:
    error = http_error(502, None)

    assert error.code is None
    assert error.message == "the daemon answered 502"
    assert error.body == {}
