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
        (503, SessionLimitError),
        (500, DaemonHTTPError),
        (418, DaemonHTTPError),
    ],
)
def test_each_status_has_its_error_type(status: int, cls: type[DaemonHTTPError]) -> None:
    error = http_error(status, {"error": "nope", "code": "some_code"})

    assert type(error) is cls
    assert (error.status, error.code, error.message) == (status, "some_code", "nope")
    assert str(error) == f"HTTP {status}: nope (some_code)"


def test_a_body_that_is_not_an_envelope_still_gives_a_message() -> None:
    error = http_error(502, None)

    assert error.code is None
    assert error.message == "the daemon answered 502"
    assert error.body == {}
