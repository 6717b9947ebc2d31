"""The SDK sends a request again while the daemon is briefly unavailable, never doing twice
what it asks: against a real in-process daemon, with a transport in front of it that plays
what a load balancer or a replica that is shutting down answers."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import httpx
import pytest

from cairn.sdk import (
    DaemonClient,
    DaemonConnectionError,
    DaemonHTTPError,
    PromptAdmission,
    SessionLimitError,
    SyncDaemonClient,
)
from cairn.sdk.retries import MAX_RETRY_AFTER_SECONDS, retry_delay
from cairn.testing import ScriptedServer

from .conftest import Daemon, StartDaemon

Fault = Callable[[httpx.Request, int], httpx.Response | Exception | None]


class Faulty(httpx.AsyncBaseTransport):
    """The real transport to the daemon, with ``fault(request, n)`` deciding for the n-th
    request (from 1) an answer instead (a response), a failure after the daemon answered (an
    exception), or nothing (the daemon's own answer)."""

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.sent: list[tuple[str, str, str | None]] = []  # (method, path, Idempotency-Key)
        self._real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(
            (request.method, request.url.path, request.headers.get("idempotency-key"))
        )
        decided = self.fault(request, len(self.sent))
        if isinstance(decided, httpx.Response):
            return decided
        response = await self._real.handle_async_request(request)
        if isinstance(decided, Exception):
            await response.aread()  # the daemon acted; its answer never reaches the client
            raise decided
        return response

    async def aclose(self) -> None:
        await self._real.aclose()


def draining(retry_after: str = "0") -> httpx.Response:
    body = {"error": "This replica is shutting down", "code": "replica_draining"}
    return httpx.Response(503, json=body, headers={"Retry-After": retry_after})


def on_prompt(number: int, outcome: httpx.Response | Exception) -> Fault:
    """``outcome`` for the ``number``-th prompt request, the daemon's answer otherwise."""
    seen = 0

    def fault(request: httpx.Request, _: int) -> httpx.Response | Exception | None:
        nonlocal seen
        if not request.url.path.endswith("/prompt"):
            return None
        seen += 1
        return outcome if seen == number else None

    return fault


def client_over(transport: Faulty, url: str, **options: object) -> DaemonClient:
    http = httpx.AsyncClient(transport=transport, trust_env=False)
    return DaemonClient(url, http_client=http, **options)  # type: ignore[arg-type]


async def test_a_prompt_whose_answer_was_lost_is_retried_with_its_key_and_runs_once(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    """The daemon admitted the prompt and the connection broke before its answer: the retry
    carries the same Idempotency-Key and gets the first admission."""
    transport = Faulty(on_prompt(1, httpx.ReadError("connection reset by peer")))
    async with client_over(transport, daemon.url) as client:
        session = await client.create_session()
        text = await client.prompt_and_wait(session.session_id, "deploy")

    prompts = [sent for sent in transport.sent if sent[1].endswith("/prompt")]
    assert len(prompts) == 2
    assert prompts[0][2] is not None and prompts[0][2] == prompts[1][2]
    assert text == "ok"
    assert [r.last_user_text() for r in scripted_server.requests_for("main")] == ["deploy"]


async def test_a_replica_shutting_down_is_answered_by_the_next_attempt(daemon: Daemon) -> None:
    transport = Faulty(on_prompt(1, draining()))
    async with client_over(transport, daemon.url) as client:
        session = await client.create_session()
        admission = await client.prompt(session.session_id, "hi")

    assert [s[1].rsplit("/", 1)[-1] for s in transport.sent] == ["session", "prompt", "prompt"]
    assert admission.replayed is False  # the first attempt was refused: nothing to replay


async def test_each_prompt_gets_its_own_key_and_a_chosen_key_is_sent(daemon: Daemon) -> None:
    transport = Faulty(lambda request, n: None)
    async with client_over(transport, daemon.url) as client:
        session = await client.create_session()
        await client.prompt(session.session_id, "one")
        await client.prompt(session.session_id, "two")
        first = await client.prompt(session.session_id, "three", idempotency_key="job-7")
        again = await client.prompt(session.session_id, "three", idempotency_key="job-7")

    keys = [key for _, path, key in transport.sent if path.endswith("/prompt")]
    assert len(set(keys[:2])) == 2 and None not in keys
    assert keys[2:] == ["job-7", "job-7"]
    assert again.replayed and again.prompt_id == first.prompt_id


async def test_a_request_that_may_have_acted_is_not_sent_again(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    """A cancel whose connection broke after the daemon got it is not repeated: a second
    cancel could stop the next prompt."""
    transport = Faulty(
        lambda r, n: httpx.ReadError("reset") if r.url.path.endswith("/cancel") else None
    )
    async with client_over(transport, daemon.url) as client:
        session = await client.create_session()
        with pytest.raises(DaemonConnectionError):
            await client.cancel(session.session_id)

    cancels = [path for _, path, _ in transport.sent if path.endswith("/cancel")]
    assert cancels == [f"/session/{session.session_id}/cancel"]


async def test_a_session_created_twice_by_a_retry_is_one_session(daemon: Daemon) -> None:
    transport = Faulty(
        lambda r, n: httpx.ReadError("reset") if r.url.path == "/session" and n == 1 else None
    )
    async with client_over(transport, daemon.url) as client:
        info = await client.create_session()
        listed = await client.list_sessions()

    assert [s["sessionId"] for s in listed] == [info.session_id]
    assert info.attached  # the retry found the session the first attempt made


class Refusals(httpx.AsyncHTTPTransport):
    """The real transport, counting the connections refused."""

    refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except httpx.ConnectError:
            self.refused += 1
            raise


async def test_a_daemon_that_comes_up_while_the_client_retries_answers(
    start_daemon: StartDaemon,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    transport = Refusals()

    async def start_once_refused() -> None:
        while not transport.refused:
            await asyncio.sleep(0.01)
        await start_daemon(port=port)

    http = httpx.AsyncClient(transport=transport, trust_env=False)
    async with DaemonClient(f"http://127.0.0.1:{port}", http_client=http) as client:
        health, _ = await asyncio.gather(client.health(), start_once_refused())
    await http.aclose()

    assert health == {"status": "ok"}
    assert transport.refused >= 1


async def test_without_retries_an_unreachable_daemon_fails_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    attempts: list[str] = []

    async def count(request: httpx.Request) -> None:
        attempts.append(request.url.path)

    http = httpx.AsyncClient(trust_env=False, event_hooks={"request": [count]})
    async with DaemonClient(f"http://127.0.0.1:{port}", http_client=http, retries=0) as client:
        with pytest.raises(DaemonConnectionError):
            await client.health()
    await http.aclose()

    assert attempts == ["/health"]


async def test_errors_that_retrying_cannot_mend_are_raised_at_once(
    start_daemon: StartDaemon,
) -> None:
    daemon = await start_daemon(max_sessions=1)
    transport = Faulty(lambda r, n: None)
    async with client_over(transport, daemon.url) as client:
        await client.create_session()
        with pytest.raises(SessionLimitError):
            await client.create_session()
        with pytest.raises(DaemonHTTPError) as gone:
            await client.prompt("00000000-0000-0000-0000-000000000000", "hi")

    assert gone.value.status == 404
    assert len(transport.sent) == 3


async def test_an_event_stream_refused_by_a_replica_shutting_down_reconnects(
    daemon: Daemon,
) -> None:
    refused = 0

    def fault(request: httpx.Request, _: int) -> httpx.Response | None:
        nonlocal refused
        if request.url.path.endswith("/events") and refused < 2:
            refused += 1
            return draining()
        return None

    transport = Faulty(fault)
    async with client_over(transport, daemon.url) as client:
        session = await client.create_session()
        text = await client.prompt_and_wait(session.session_id, "hi")

    assert text == "ok" and refused == 2


def blocking_prompts_with_one_key(url: str) -> tuple[PromptAdmission, PromptAdmission]:
    with SyncDaemonClient(url, retries=3) as client:
        session = client.create_session()
        first = client.prompt(session.session_id, "once", idempotency_key="k-1")
        again = client.prompt(session.session_id, "once", idempotency_key="k-1")
    return first, again


async def test_the_blocking_client_sends_the_key_it_is_given(daemon: Daemon) -> None:
    """SyncDaemonClient takes the same ``retries`` and ``idempotency_key``."""
    first, again = await asyncio.to_thread(blocking_prompts_with_one_key, daemon.url)

    assert again.replayed and again.prompt_id == first.prompt_id


@pytest.mark.parametrize(
    ("attempt", "retry_after", "expected"),
    [
        (1, None, 0.25),
        (2, None, 0.5),
        (6, None, 4.0),  # the backoff's cap
        (1, "2", 2.0),  # the daemon asks for longer
        (3, "0", 1.0),  # ... or for nothing: the backoff still applies
        (1, "3600", MAX_RETRY_AFTER_SECONDS),
        (1, "Wed, 21 Oct 2026 07:28:00 GMT", 0.25),
        (1, "nan", 0.25),
        (1, "-5", 0.25),
    ],
)
def test_the_wait_before_a_retry(attempt: int, retry_after: str | None, expected: float) -> None:
    assert retry_delay(attempt, retry_after) == expected
