"""A real HAProxy in front of ``cairn serve`` replicas, for tests and benchmarks.

:func:`haproxy_config` writes the configuration docs/daemon.md documents for several replicas
(``tests/daemon/test_replica_docs.py`` checks the page shows exactly it): round robin, no
stickiness, ``GET /ready`` as the health check, a request refused by a replica that is shutting
down (``503``) or a connection refused sent to another replica, and event streams kept open.
:class:`HAProxy` runs it on a free loopback port as a child that dies with the process that
started it (as :class:`~cairn.testing.postgres.PostgresServer` does)::

    with HAProxy(["127.0.0.1:4171", "127.0.0.1:4172"], token="t") as proxy:
        client = DaemonClient(proxy.url, "t")

The program is Debian's ``haproxy`` (``.ci/system-packages`` installs it); :func:`find_haproxy`
says where it is, or None.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cairn.testing._service import ProgramService, free_port

__all__ = ["HAProxy", "HAProxyUnavailable", "find_haproxy", "haproxy_config"]

TOKEN_VARIABLE = "CAIRN_SERVER_TOKEN"  # noqa: S105 - a variable name; the health checks' bearer token, read by HAProxy


class HAProxyUnavailable(RuntimeError):
    """HAProxy is not installed."""


def find_haproxy() -> Path | None:
    """The ``haproxy`` program (``PATH``, then Debian's ``/usr/sbin``), or None."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
    return Path(found) if found else None


def haproxy_config(bind: str, replicas: Sequence[str]) -> str:
    """HAProxy's configuration for ``replicas`` (``host:port`` each) behind ``bind``.

    Each server is named by its address: ``http-send-name-header Host`` then sends it as the
    ``Host`` a replica on a loopback address checks, and the health check sends it too.
    """
    servers = "".join(f"    server {address} {address}\n" for address in replicas)
    return f"""\
global
    log stderr format raw local0 warning

defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout client 60s
    timeout server 10m
    timeout http-keep-alive 10s

frontend cairn
    bind {bind}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /ready ver HTTP/1.1 hdr Host %[srv_name] hdr Authorization "Bearer ${{{TOKEN_VARIABLE}}}"
    http-check expect status 200
    http-send-name-header Host
    retry-on conn-failure 503
    retries 3
    option redispatch 1
    default-server check inter 1s fall 2 rise 1
{servers}"""  # noqa: E501


class HAProxy(ProgramService):
    """HAProxy on a free loopback port in front of ``replicas``, for a ``with`` block."""

    name = "haproxy"

    def __init__(
        self, replicas: Sequence[str], *, token: str = "", program: Path | None = None
    ) -> None:
        super().__init__(program or find_haproxy())
        self.replicas = list(replicas)
        self.token = token

    @property
    def log(self) -> str:
        """What HAProxy wrote so far (its warnings: servers going down and up)."""
        if self._root is None:
            return ""
        return (self._root / "haproxy.log").read_text(errors="replace")

    def start(self) -> HAProxy:
        if self.program is None:
            raise HAProxyUnavailable("HAProxy is not installed: apt-get install -y haproxy")
        self._root = Path(tempfile.mkdtemp(prefix="cairn-haproxy-"))
        try:
            self.port = free_port()
            config = self._root / "haproxy.cfg"
            config.write_text(haproxy_config(f"127.0.0.1:{self.port}", self.replicas))
            env = {**os.environ, TOKEN_VARIABLE: self.token}
            command = [str(self.program), "-f", str(config), "-db"]
            self._launch(command, self._root / "haproxy.log", env)
            self._wait_until_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def _output(self) -> str:
        return self.log
