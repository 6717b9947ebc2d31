"""Any request body, to any route that reads one, gets a clear answer: never a 500, always the
JSON error shape, and the daemon keeps serving (issue #18's class of body bugs)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .helpers import RunningDaemon

SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3)
text = st.text(max_size=20) | SURROGATES
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=25,
)
fields = st.sampled_from(
    [
        "prompt",
        "retry",
        "continueLastTurn",
        "sessionId",
        "approvalMode",
        "cwd",
        "mode",
        "outcome",
        "answers",
        "mcpServers",
        "_meta",
    ]
)
bodies = values | st.dictionaries(fields, values, max_size=4)
ROUTES = (
    "/session",
    "/session/{id}/prompt",
    "/session/{id}/load",
    "/session/{id}/approval-mode",
    "/session/{id}/permission/nope",
    "/session/{id}/cancel",
    "/session/{id}/recap",
)
NESTED = st.integers(50, 3000).map(lambda n: "[" * n + "]" * n)


def encoded(value: Any) -> bytes:
    """JSON text as a client could send it: lone surrogates as \\u escapes."""
    return json.dumps(value, ensure_ascii=True).encode()


async def check(daemon: RunningDaemon, session_id: str, route: str, body: bytes) -> None:
    path = route.format(id=session_id)
    response = await daemon.http.post(
        path, content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code < 500, (path, body[:200], response.text)
    if response.status_code == 202:  # admitted: every field had its documented type
        admitted = json.loads(body)
        assert all(isinstance(admitted.get(f, False), bool) for f in ("retry", "continueLastTurn"))
    if response.status_code >= 400:
        answer = response.json()
        assert isinstance(answer["error"], str)
        assert response.status_code == 401 or isinstance(answer["code"], str)
    assert (await daemon.http.get("/health")).status_code == 200


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(route=st.sampled_from(ROUTES), body=bodies.map(encoded) | NESTED.map(str.encode))
async def test_any_json_body_gets_a_clear_answer(
    daemon: RunningDaemon, route: str, body: bytes
) -> None:
    session_id = await daemon.create_session()
    await check(daemon, session_id, route, body)
    await daemon.http.delete(f"/session/{session_id}")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(route=st.sampled_from(ROUTES), body=st.binary(max_size=200))
async def test_any_bytes_get_a_clear_answer(daemon: RunningDaemon, route: str, body: bytes) -> None:
    session_id = await daemon.create_session()
    await check(daemon, session_id, route, body)
    await daemon.http.delete(f"/session/{session_id}")
