"""The front door: token, Origin, Host and body size, over real HTTP."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from cairn.daemon.security import bearer_matches

from .conftest import StartDaemon
from .helpers import TOKEN, RunningDaemon

DIGEST = hashlib.sha256(TOKEN.encode()).digest()


def client(daemon: RunningDaemon, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=daemon.url,
        trust_env=False,
        verify=False,  # noqa: S501 - plain HTTP to loopback: nothing to verify
        headers=headers,
    )


# ----- bearer token -----


@pytest.mark.parametrize(
    "header",
    [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"  BEARER   {TOKEN}  "],
)
def test_the_token_is_accepted_with_any_scheme_case_and_spacing(header: str) -> None:
    assert bearer_matches(header, DIGEST)


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer ", f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}"],
)
def test_anything_else_is_refused(header: str | None) -> None:
    assert not bearer_matches(header, DIGEST)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}],
)
async def test_every_auth_failure_is_the_same_401(
    start_daemon: StartDaemon, headers: dict[str, str]
) -> None:
    daemon = await start_daemon(token=TOKEN)
    async with client(daemon, **headers) as http:
        response = await http.post("/session", json={})

    assert response.status_code == 401
    assert response.json() == {"error": "Unauthorized"}
    assert len(daemon.registry) == 0


async def test_the_right_token_is_let_through(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(token=TOKEN)

    assert (await daemon.http.post("/session", json={})).status_code == 200


async def test_health_needs_no_token_on_a_loopback_bind(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(token=TOKEN)
    async with client(daemon) as http:
        assert (await http.get("/health")).status_code == 200
        assert (await http.get("/capabilities")).status_code == 401


async def test_without_a_token_loopback_routes_are_open(daemon: RunningDaemon) -> None:
    async with client(daemon) as http:
        assert (await http.post("/session", json={})).status_code == 200


# ----- Origin -----


async def test_a_browser_origin_is_refused(daemon: RunningDaemon) -> None:
    async with client(daemon, Origin="https://evil.example") as http:
        response = await http.post("/session", json={})

    assert response.status_code == 403
    assert response.json() == {
        "error": "Request denied by CORS policy",
        "code": "origin_not_allowed",
    }
    assert len(daemon.registry) == 0


async def test_the_daemons_own_origin_is_allowed(daemon: RunningDaemon) -> None:
    async with client(daemon, Origin=daemon.url) as http:
        response = await http.get("/health")

    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_an_allowed_origin_gets_cors_headers(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(allow_origins=("https://app.example",))
    async with client(daemon, Origin="https://app.example") as http:
        response = await http.get("/capabilities")

    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://app.example"
    assert response.headers["vary"] == "Origin"
    assert "allow_origin" in response.json()["features"]


async def test_a_preflight_from_an_allowed_origin_is_answered(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(allow_origins=("https://app.example",))
    async with client(daemon, Origin="https://app.example") as http:
        response = await http.options("/session")

    assert response.status_code == 204
    assert "Authorization" in response.headers["access-control-allow-headers"]
    assert "DELETE" in response.headers["access-control-allow-methods"]


async def test_an_origin_not_on_the_list_is_still_refused(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(allow_origins=("https://app.example",))
    async with client(daemon, Origin="https://other.example") as http:
        assert (await http.get("/health")).status_code == 403


# ----- Host (DNS rebinding) -----


async def test_a_foreign_host_header_is_refused_on_loopback(daemon: RunningDaemon) -> None:
    port = daemon.server.port
    async with client(daemon, Host=f"rebound.example:{port}") as http:
        response = await http.get("/health")

    assert response.status_code == 403
    assert response.json()["code"] == "host_not_allowed"


@pytest.mark.parametrize("name", ["localhost", "LOCALHOST", "127.0.0.1", "[::1]"])
async def test_loopback_host_names_with_the_bound_port_are_allowed(
    daemon: RunningDaemon, name: str
) -> None:
    async with client(daemon, Host=f"{name}:{daemon.server.port}") as http:
        assert (await http.get("/health")).status_code == 200


async def test_a_loopback_name_with_another_port_is_refused(daemon: RunningDaemon) -> None:
    async with client(daemon, Host="localhost:1") as http:
        assert (await http.get("/health")).status_code == 403


# ----- body size -----


async def test_a_declared_body_over_the_limit_is_a_413(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(max_body_bytes=1024)
    session_id = await daemon.create_session()

    response = await daemon.http.post(f"/session/{session_id}/prompt", json={"prompt": "x" * 2000})

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert response.json()["limit"] == 1024


async def test_a_chunked_body_over_the_limit_is_a_413(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(max_body_bytes=1024)
    session_id = await daemon.create_session()

    async def chunks():  # no Content-Length: the body is counted as it is read
        for _ in range(4):
            yield b"x" * 512

    response = await daemon.http.post(f"/session/{session_id}/prompt", content=chunks())

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
