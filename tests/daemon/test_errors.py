"""The error envelope."""

from __future__ import annotations

import json

from cairn.daemon.errors import ApiError, error_body, json_bytes


def test_an_api_error_body_has_error_code_and_details() -> None:
    error = ApiError(404, "No session", "session_not_found", sessionId="s1")

    assert error.body() == {"error": "No session", "code": "session_not_found", "sessionId": "s1"}


def test_the_code_is_left_out_when_there_is_none() -> None:
    assert error_body("Unauthorized") == {"error": "Unauthorized"}


def test_json_bytes_is_one_compact_line_and_keeps_unicode() -> None:
    raw = json_bytes({"text": "多行\n文本", "n": 1})

    assert b"\n" not in raw and b" " not in raw
    assert json.loads(raw) == {"text": "多行\n文本", "n": 1}
