"""``cairn -p`` reaching the model endpoint through a real forward proxy (Debian's tinyproxy).

The proxy's log says what it carried (``CONNECT host:port`` for a tunnel, ``POST http://...``
for a request in absolute form), and a request it forwarded reaches the scripted server with
its ``Via: 1.1 tinyproxy`` header. The ``https://`` endpoint is a scripted server with a
certificate from a CA made here with ``openssl``, trusted through ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply
from cairn.testing.tinyproxy import TinyProxy, find_tinyproxy

from ..certificates import Certificates, certificates_fixture  # noqa: F401 (a fixture)
from .conftest import RunCairn, trust_in_user_settings, wait_for_extract_workers, write_settings

pytestmark = pytest.mark.skipif(
    find_tinyproxy() is None, reason="tinyproxy is not installed (.ci/system-packages)"
)
CHAT = "/v1/chat/completions"
NO_MEMORY = {"memory": {"enableManagedAutoMemory": False}}


def _through(env: dict[str, str], **variables: str) -> dict[str, str]:
    """``env`` without the loopback exemption the test environment carries, plus ``variables``."""
    kept = {k: v for k, v in env.items() if k.lower() != "no_proxy"}
    return {**kept, **variables}


@pytest.fixture
def proxy() -> Iterator[TinyProxy]:
    with TinyProxy() as running:
        yield running


@pytest.fixture
def tls_server(certificates: Certificates) -> Iterator[ScriptedServer]:
    with ScriptedServer(tls=certificates.server_context()) as server:
        yield server


def _https_env(env: dict[str, str], server: ScriptedServer, **variables: str) -> dict[str, str]:
    return _through(env, OPENAI_BASE_URL=server.base_url, **variables)


def test_a_turn_reaches_an_http_endpoint_through_http_proxy(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    proxy: TinyProxy,
) -> None:
    scripted_server.enqueue(reply("Through the proxy."))

    done = run_cairn("-p", "hi", env=_through(cairn_env, HTTP_PROXY=proxy.url))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Through the proxy.\n"
    assert f"POST http://127.0.0.1:{scripted_server.port}{CHAT}" in proxy.requests()
    [request] = scripted_server.requests_for("main")
    assert "tinyproxy" in request.headers.get("via", "")  # forwarded by it, not sent direct


def test_an_https_endpoint_is_reached_through_a_connect_tunnel_trusting_ssl_cert_file(
    run_cairn: RunCairn,
    tls_server: ScriptedServer,
    cairn_env: dict[str, str],
    proxy: TinyProxy,
    certificates: Certificates,
) -> None:
    tls_server.enqueue(reply("Tunnelled."))
    env = _https_env(
        cairn_env, tls_server, HTTPS_PROXY=proxy.url, SSL_CERT_FILE=str(certificates.ca)
    )

    done = run_cairn("-p", "hi", env=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Tunnelled.\n"
    assert f"CONNECT 127.0.0.1:{tls_server.port}" in proxy.requests()
    assert tls_server.requests_for("main")


def test_an_endpoint_whose_ca_is_not_trusted_says_where_the_ca_goes(
    run_cairn: RunCairn, tls_server: ScriptedServer, cairn_env: dict[str, str], proxy: TinyProxy
) -> None:
    env = _https_env(cairn_env, tls_server, HTTPS_PROXY=proxy.url)
    env.pop("SSL_CERT_FILE", None)
    env.pop("SSL_CERT_DIR", None)

    done = run_cairn("-p", "hi", env=env)

    assert done.returncode == 1
    assert "certificate is not trusted" in done.stderr
    assert "SSL_CERT_FILE" in done.stderr
    assert "Traceback" not in done.stderr
    assert tls_server.requests == []


def _trusting_only(env: dict[str, str], **variables: str) -> dict[str, str]:
    """``env`` without the machine's CA variables, plus ``variables``."""
    dropped = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")
    return {**{k: v for k, v in env.items() if k not in dropped}, **variables}


def test_node_extra_ca_certs_adds_a_proxys_ca_for_the_endpoint(
    run_cairn: RunCairn,
    tls_server: ScriptedServer,
    cairn_env: dict[str, str],
    proxy: TinyProxy,
    certificates: Certificates,
) -> None:
    """Users of Qwen Code and Claude Code behind a TLS-intercepting proxy have its CA in
    NODE_EXTRA_CA_CERTS (added to the default CAs, as Node.js reads it); it is trusted here
    too."""
    tls_server.enqueue(reply("Trusted."))
    env = _trusting_only(
        _https_env(cairn_env, tls_server, HTTPS_PROXY=proxy.url),
        NODE_EXTRA_CA_CERTS=str(certificates.ca),
    )

    done = run_cairn("-p", "hi", env=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Trusted.\n"
    assert f"CONNECT 127.0.0.1:{tls_server.port}" in proxy.requests()


def test_an_unreadable_node_extra_ca_certs_is_named_never_a_crash(
    run_cairn: RunCairn,
    tls_server: ScriptedServer,
    cairn_env: dict[str, str],
    certificates: Certificates,
    tmp_path: Path,
) -> None:
    missing = tmp_path / "corporate-ca.pem"
    https = _https_env(cairn_env, tls_server)
    tls_server.enqueue(reply("Still trusted."))

    trusted = run_cairn(
        "-p",
        "hi",
        env=_trusting_only(
            https, NODE_EXTRA_CA_CERTS=str(missing), SSL_CERT_FILE=str(certificates.ca)
        ),
    )
    untrusted = run_cairn("-p", "hi", env=_trusting_only(https, NODE_EXTRA_CA_CERTS=str(missing)))

    assert trusted.returncode == 0, trusted.stderr  # the rest of the trust store still applies
    assert trusted.stdout == "Still trusted.\n"
    assert (  # said at start, where the settings' warnings are
        f"warning: NODE_EXTRA_CA_CERTS names {str(missing)!r}, which was not added to the "
        "trusted certificates: No such file or directory"
    ) in trusted.stderr
    assert untrusted.returncode == 1
    assert "certificate is not trusted" in untrusted.stderr
    assert (
        f"NODE_EXTRA_CA_CERTS names {str(missing)!r}, which was not added to the trusted "
        "certificates: No such file or directory"
    ) in " ".join(untrusted.stderr.split())
    assert "Traceback" not in trusted.stderr + untrusted.stderr


def test_no_proxy_sends_a_listed_endpoint_direct(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    proxy: TinyProxy,
) -> None:
    scripted_server.enqueue(reply("Direct."))
    env = _through(
        cairn_env, HTTP_PROXY=proxy.url, NO_PROXY=f"example.com, 127.0.0.1:{scripted_server.port}"
    )

    done = run_cairn("-p", "hi", env=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Direct.\n"
    assert proxy.requests() == []
    [request] = scripted_server.requests_for("main")
    assert "via" not in request.headers


def test_credentials_in_the_proxy_url_are_sent_to_it(
    run_cairn: RunCairn,
    tls_server: ScriptedServer,
    cairn_env: dict[str, str],
    certificates: Certificates,
) -> None:
    tls_server.enqueue(reply("Authenticated."))
    with TinyProxy(user="alice", password="s3cret") as proxy:
        env = _https_env(
            cairn_env,
            tls_server,
            HTTPS_PROXY=proxy.url_with_credentials(),
            SSL_CERT_FILE=str(certificates.ca),
        )

        done = run_cairn("-p", "hi", env=env)

        assert done.returncode == 0, done.stderr
        assert done.stdout == "Authenticated.\n"
        assert f"CONNECT 127.0.0.1:{tls_server.port}" in proxy.requests()


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_credentials_the_proxy_refuses_are_a_clear_error_that_never_shows_the_password(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    tls_server: ScriptedServer,
    cairn_env: dict[str, str],
    certificates: Certificates,
    scheme: str,
) -> None:
    server = tls_server if scheme == "https" else scripted_server
    with TinyProxy(user="alice", password="s3cret") as proxy:
        wrong = proxy.url_with_credentials(password="hunter2-wrong")
        env = _https_env(
            cairn_env,
            server,
            HTTPS_PROXY=wrong,
            HTTP_PROXY=wrong,
            SSL_CERT_FILE=str(certificates.ca),
        )

        done = run_cairn("-p", "hi", env=env)

    assert done.returncode == 1
    variable = "HTTPS_PROXY" if scheme == "https" else "HTTP_PROXY"
    assert f"the proxy {proxy.url} ({variable})" in done.stderr
    if scheme == "https" or "refused the request" in done.stderr:
        assert "did not accept the user and password" in done.stderr
    # else tinyproxy answered 407 and hung up before reading the body: the reset names the proxy
    assert "hunter2" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    assert server.requests == []


def test_a_proxy_that_forbids_the_endpoint_is_a_clear_error(
    run_cairn: RunCairn,
    tls_server: ScriptedServer,
    cairn_env: dict[str, str],
    certificates: Certificates,
) -> None:
    with TinyProxy(connect_ports=[443]) as proxy:  # CONNECT elsewhere is refused with 403
        env = _https_env(
            cairn_env, tls_server, HTTPS_PROXY=proxy.url, SSL_CERT_FILE=str(certificates.ca)
        )

        done = run_cairn("-p", "hi", env=env)

    assert done.returncode == 1
    assert (
        f"the proxy {proxy.url} (HTTPS_PROXY) refused to connect to 127.0.0.1:{tls_server.port}"
        in done.stderr
    )
    assert "HTTP 403" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_proxy_that_cannot_reach_the_endpoint_is_a_clear_error(
    run_cairn: RunCairn, cairn_env: dict[str, str], proxy: TinyProxy, project: Path
) -> None:
    write_settings(project, {**NO_MEMORY, "model": {"generationConfig": {"maxRetries": 1}}})
    with ScriptedServer(tls=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)) as gone:
        port = gone.port  # a port nothing listens on once it stops
    env = _through(cairn_env, OPENAI_BASE_URL=f"https://127.0.0.1:{port}/v1", HTTPS_PROXY=proxy.url)

    done = run_cairn("-p", "hi", env=env)

    assert done.returncode == 1
    assert (
        f"the proxy {proxy.url} (HTTPS_PROXY) could not connect to 127.0.0.1:{port}" in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_a_proxy_nothing_listens_on_is_named_in_the_error(
    run_cairn: RunCairn, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    with TinyProxy() as stopped:
        url = stopped.url
    done = run_cairn("-p", "hi", env=_through(cairn_env, HTTP_PROXY=url))

    assert done.returncode == 1
    assert f"cannot connect to the proxy {url} (HTTP_PROXY): connection refused" in done.stderr
    assert scripted_server.requests == []


def test_the_proxy_flag_wins_over_the_environment(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    proxy: TinyProxy,
) -> None:
    scripted_server.enqueue(reply("Flagged."))
    env = _through(cairn_env, HTTP_PROXY="http://127.0.0.1:1")  # nothing listens there

    done = run_cairn("-p", "hi", "--proxy", proxy.url, env=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Flagged.\n"
    assert f"POST http://127.0.0.1:{scripted_server.port}{CHAT}" in proxy.requests()


def test_the_users_proxy_setting_is_used(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    proxy: TinyProxy,
) -> None:
    scripted_server.enqueue(reply("Set by the user."))
    (Path(cairn_env["CAIRN_HOME"]) / "settings.json").write_text(json.dumps({"proxy": proxy.url}))

    done = run_cairn("-p", "hi", env=_through(cairn_env))

    assert done.returncode == 0, done.stderr
    assert f"POST http://127.0.0.1:{scripted_server.port}{CHAT}" in proxy.requests()


@pytest.mark.parametrize("key", ["proxy", "Proxy", "PROXY", "https_proxy", "httpsProxy"])
def test_an_untrusted_projects_proxy_setting_never_carries_the_users_key(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    proxy: TinyProxy,
    key: str,
) -> None:
    """A repository the user merely opens must not route the model's requests (and the API key
    they carry) through a proxy of its choosing, whatever the key's spelling."""
    write_settings(project, {**NO_MEMORY, key: proxy.url})
    scripted_server.enqueue(reply("Direct."))

    done = run_cairn("-p", "hi", env=_through(cairn_env))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Direct.\n"
    assert proxy.requests() == []
    [request] = scripted_server.requests_for("main")
    assert "via" not in request.headers
    if key == "proxy":
        assert "not a trusted folder" in done.stderr
        assert "(1 endpoint setting)" in done.stderr  # listed with those sending the key away
    else:
        assert "unknown" in done.stderr.lower()


def test_an_untrusted_projects_env_cannot_set_a_proxy_either(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    proxy: TinyProxy,
) -> None:
    variables = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "CAIRN_PROXY")
    write_settings(project, {**NO_MEMORY, "env": dict.fromkeys(variables, proxy.url)})
    scripted_server.enqueue(reply("Direct."))

    done = run_cairn("-p", "hi", env=_through(cairn_env))

    assert done.returncode == 0, done.stderr
    assert proxy.requests() == []
    assert "not a trusted folder" in done.stderr


def test_a_trusted_projects_proxy_setting_is_used(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    proxy: TinyProxy,
) -> None:
    write_settings(project, {**NO_MEMORY, "proxy": proxy.url})
    trust_in_user_settings(project)
    scripted_server.enqueue(reply("Trusted."))

    done = run_cairn("-p", "hi", env=_through(cairn_env))

    assert done.returncode == 0, done.stderr
    assert f"POST http://127.0.0.1:{scripted_server.port}{CHAT}" in proxy.requests()


def test_a_password_in_the_proxy_flag_is_warned_about(
    run_cairn: RunCairn, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    """The command line is in every local user's process list (as --token and --database)."""
    scripted_server.enqueue(reply("Warned."))
    with TinyProxy(user="alice", password="s3cret") as proxy:
        flag = proxy.url_with_credentials()

        done = run_cairn("-p", "hi", "--proxy", flag, env=_through(cairn_env))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Warned.\n"
    assert "--proxy shows the proxy's password to every user" in done.stderr
    assert "s3cret" not in done.stderr


@pytest.mark.slow
def test_the_memory_worker_of_a_run_with_the_proxy_flag_uses_the_proxy_too(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    proxy: TinyProxy,
) -> None:
    """``cairn -p`` hands its Extract to a detached worker process, which inherits the flag's
    ``CAIRN_PROXY``: its model requests go the way the turn's did."""
    write_settings(project, {"memory": {"enableManagedAutoMemory": True}})
    scripted_server.default = reply("Noted.")

    done = run_cairn(
        "-p", "Remember that staging is called ORCA.", "--proxy", proxy.url, env=_through(cairn_env)
    )

    assert done.returncode == 0, done.stderr
    [extract] = scripted_server.wait_for_requests(1, purpose="extract", timeout=60)
    wait_for_extract_workers(project)
    assert "tinyproxy" in extract.headers.get("via", "")
    assert all("tinyproxy" in r.headers.get("via", "") for r in scripted_server.requests)
