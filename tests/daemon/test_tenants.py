"""`cairn serve --tenant-header`: each request names its tenant; a tenant sees only its own
sessions and recordings (memory: tests/e2e/test_daemon_tenants.py, with real processes)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from cairn.daemon.config import DaemonConfig, DaemonConfigError

from .conftest import StartDaemon
from .helpers import TOKEN, RunningDaemon, collect_until

HEADER = "X-Cairn-Tenant"


def test_a_tenant_header_without_a_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DaemonConfigError, match="--tenant-header needs a token"):
        DaemonConfig(workspace=tmp_path, tenant_header=HEADER).validate()
    with pytest.raises(DaemonConfigError, match="is not an HTTP header name"):
        DaemonConfig(workspace=tmp_path, token=TOKEN, tenant_header="X Tenant").validate()
    DaemonConfig(workspace=tmp_path, token=TOKEN, tenant_header=HEADER).validate()


async def test_every_session_route_needs_a_valid_tenant(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(token=TOKEN, tenant_header=HEADER)

    missing = await daemon.http.post("/session", json={})
    forged = await daemon.http.post("/session", json={}, headers={HEADER: "../acme"})
    listed = await daemon.http.get("/workspace/sessions")
    health = await daemon.http.get("/health")
    capabilities = (await daemon.http.get("/capabilities")).json()

    assert (missing.status_code, missing.json()["code"]) == (400, "tenant_required")
    assert f"needs the {HEADER} header" in missing.json()["error"]
    assert (forged.status_code, forged.json()["code"]) == (400, "invalid_tenant")
    assert listed.status_code == 400
    assert health.status_code == 200  # load balancers probe without a tenant
    assert "tenants" in capabilities["features"] and capabilities["tenantHeader"] == HEADER


def tenant(daemon: RunningDaemon, name: str) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {TOKEN}", HEADER: name}
    return httpx.AsyncClient(base_url=daemon.url, trust_env=False, headers=headers, timeout=10)


async def test_a_tenant_never_reaches_another_tenants_session(
    start_daemon: StartDaemon, home: Path
) -> None:
    daemon = await start_daemon(token=TOKEN, tenant_header=HEADER)
    async with tenant(daemon, "acme") as acme, tenant(daemon, "globex") as globex:
        session_id = (await acme.post("/session", json={})).json()["sessionId"]
        admitted = await acme.post(f"/session/{session_id}/prompt", json={"prompt": "hi"})
        assert admitted.status_code == 202
        await collect_until(acme, session_id, "turn_complete")

        for method, path in [
            ("GET", "status"), ("GET", "commands"), ("POST", "prompt"), ("GET", "events"),
            ("POST", "cancel"), ("POST", "recap"), ("POST", "approval-mode"),
        ]:  # fmt: skip
            body = {"prompt": "x", "mode": "yolo"}
            answer = await globex.request(method, f"/session/{session_id}/{path}", json=body)
            assert (path, answer.status_code) == (path, 404), answer.text
        assert (await globex.delete(f"/session/{session_id}")).status_code == 404
        loaded = await globex.post(f"/session/{session_id}/load", json={})
        assert loaded.status_code == 404  # acme's recording is not globex's to load
        same_id = await globex.post("/session", json={"sessionId": session_id})
        assert same_id.json()["attached"] is False  # globex's own new session, not acme's

        acme_list = (await acme.get("/workspace/sessions")).json()["sessions"]
        globex_list = (await globex.get("/workspace/sessions")).json()["sessions"]
        assert [(s["sessionId"], s["live"]) for s in acme_list] == [(session_id, True)]
        assert [(s["sessionId"], s["live"]) for s in globex_list] == [(session_id, True)]
        assert (await acme.delete(f"/session/{session_id}")).status_code == 204
        assert (await globex.get(f"/session/{session_id}/status")).status_code == 200
        recorded = (await acme.get("/workspace/sessions")).json()["sessions"]
        assert [(s["sessionId"], s["live"]) for s in recorded] == [(session_id, False)]
        recordings = sorted(p.relative_to(home).as_posix() for p in home.rglob("chats/*.jsonl"))
        assert [p.split("/tenants/")[1] for p in recordings] == [
            f"acme/chats/{session_id}.jsonl",
            f"globex/chats/{session_id}.jsonl",
        ]


async def test_a_tenant_reaches_the_model_routes_of_its_own_session(
    start_daemon: StartDaemon,
) -> None:
    """Regression (#24): GET and POST /session/{id}/model looked the session up without the
    tenant, so on a daemon serving tenants they answered 404 to the session's own tenant."""
    daemon = await start_daemon(token=TOKEN, tenant_header=HEADER)
    async with tenant(daemon, "acme") as acme, tenant(daemon, "globex") as globex:
        session_id = (await acme.post("/session", json={})).json()["sessionId"]
        models = await acme.get(f"/session/{session_id}/model")
        chosen = models.json()["currentModelId"]
        switched = await acme.post(f"/session/{session_id}/model", json={"modelId": chosen})
        foreign = await globex.get(f"/session/{session_id}/model")

    assert models.status_code == 200, models.text
    assert (switched.status_code, switched.json()["modelId"]) == (200, chosen)
    assert foreign.status_code == 404


@pytest.mark.parametrize("name", ["Acme", "ACME", "acMe", "a\u212a"])
async def test_a_tenant_name_differing_only_in_case_is_refused(
    start_daemon: StartDaemon, home: Path, name: str
) -> None:
    """#24 follow-up: `Acme` and `acme` were two tenants to the daemon but one folder on a
    case-insensitive file system (macOS, a casefolded ext4), so each read and wrote the other's
    recordings and memory. Tenant names are lower-case; one with a capital is refused before
    anything is stored (the Kelvin sign, which casefolds to k, is no letter it accepts)."""
    daemon = await start_daemon(token=TOKEN, tenant_header=HEADER)
    async with tenant(daemon, "acme") as acme:
        assert (await acme.post("/session", json={})).status_code == 200
    headers = {"Authorization": f"Bearer {TOKEN}", HEADER: name}
    async with httpx.AsyncClient(
        base_url=daemon.url, trust_env=False, headers={}, timeout=10
    ) as http:
        answer = await http.post(
            "/session", json={}, headers={k: v.encode() for k, v in headers.items()}
        )

    assert (answer.status_code, answer.json()["code"]) == (400, "invalid_tenant")
    assert "lower-case" in answer.json()["error"]
    stored = [p.name for p in home.rglob("*") if p.parent.name == "tenants"]
    assert set(stored) <= {"acme"}, stored
