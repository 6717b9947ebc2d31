"""The daemon's error envelope: ``{"error": message, "code": code, ...details}``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["STRICT_REASON", "ApiError", "error_body", "json_bytes", "token_required"]

STRICT_REASON = "it needs a daemon started with a token (--token or CAIRN_SERVER_TOKEN)"


class ApiError(Exception):
    """An error answered to the client; raised anywhere below a route handler."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})
        self.details = details

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.code, **self.details)


def token_required(message: str) -> ApiError:
    """The answer to a strict request (one that widens permissions) on a daemon without a
    token: 401 ``token_required``."""
    return ApiError(401, message, "token_required")


def error_body(message: str, code: str | None = None, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"error": message}
    if code is not None:
        body["code"] = code
    body.update(details)
    return body


def json_bytes(value: Any) -> bytes:
    """Compact JSON on one line (SSE frames must not contain newlines)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
