"""A real forward proxy (tinyproxy) on a free loopback port, for tests of the model's proxy.

:class:`TinyProxy` writes a configuration that listens on 127.0.0.1 only and allows only
loopback clients, optionally with a user and password (``BasicAuth``) and a list of the ports
``CONNECT`` may reach (others are refused with ``403``), and runs it as a child that dies with
the process that started it (as :class:`~cairn.testing.haproxy.HAProxy` does)::

    with TinyProxy(user="alice", password="s3cret") as proxy:
        env["HTTPS_PROXY"] = proxy.url_with_credentials()
        ...
        assert proxy.requests() == ["CONNECT 127.0.0.1:4242"]

:meth:`TinyProxy.requests` reads what it was asked to carry from its log: ``CONNECT host:port``
for a tunnel, ``POST http://host:port/path`` for a request in absolute form.

The program is Debian's ``tinyproxy`` (package ``tinyproxy-bin``, which ``.ci/system-packages``
installs); :func:`find_tinyproxy` says where it is, or None.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cairn.testing._service import ProgramService, free_port

__all__ = ["TinyProxy", "TinyProxyUnavailable", "find_tinyproxy", "tinyproxy_config"]

START_ATTEMPTS = 3  # a free port taken by another process between the probe and the bind
_REQUEST_LINE = re.compile(r"Request \(file descriptor \d+\): (\S+) (\S+) HTTP/")


class TinyProxyUnavailable(RuntimeError):
    """tinyproxy is not installed."""


def find_tinyproxy() -> Path | None:
    """The ``tinyproxy`` program (``PATH``, then ``/usr/sbin``), or None."""
    found = shutil.which("tinyproxy") or shutil.which("tinyproxy", path="/usr/sbin:/usr/bin")
    return Path(found) if found else None


def tinyproxy_config(
    port: int,
    log: Path,
    *,
    user: str | None = None,
    password: str | None = None,
    connect_ports: Sequence[int] | None = None,
) -> str:
    """tinyproxy's configuration: loopback only, every request logged to ``log`` (a request it
    forwards carries its ``Via: 1.1 tinyproxy`` header); ``user`` and ``password`` required when
    given; ``CONNECT`` only to ``connect_ports`` when given."""
    lines = [
        f"Port {port}",
        "Listen 127.0.0.1",
        "Allow 127.0.0.1",
        "Timeout 60",
        "MaxClients 200",
        f'LogFile "{log}"',
        "LogLevel Info",  # a line per request: what requests() reads
    ]
    if user is not None:
        lines.append(f"BasicAuth {user} {password or ''}")
    lines += [f"ConnectPort {allowed}" for allowed in connect_ports or ()]
    return "\n".join(lines) + "\n"


class TinyProxy(ProgramService):
    """tinyproxy on a free loopback port, for a ``with`` block."""

    name = "tinyproxy"

    def __init__(
        self,
        *,
        user: str | None = None,
        password: str | None = None,
        connect_ports: Sequence[int] | None = None,
        program: Path | None = None,
    ) -> None:
        super().__init__(program or find_tinyproxy())
        self.user = user
        self.password = password
        self.connect_ports = list(connect_ports) if connect_ports is not None else None

    def url_with_credentials(self, user: str | None = None, password: str | None = None) -> str:
        """The URL with ``user:password@`` (the configured ones by default)."""
        return f"http://{user or self.user}:{password or self.password}@127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        """What tinyproxy logged so far."""
        if self._root is None:
            return ""
        path = self._root / "tinyproxy.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def requests(self) -> list[str]:
        """What it was asked to carry, in order: ``CONNECT host:port`` or ``METHOD url``."""
        return [f"{m[1]} {m[2]}" for m in _REQUEST_LINE.finditer(self.log)]

    def start(self) -> TinyProxy:
        if self.program is None:
            raise TinyProxyUnavailable(
                "tinyproxy is not installed: apt-get install -y tinyproxy-bin"
            )
        self._root = Path(tempfile.mkdtemp(prefix="cairn-tinyproxy-"))
        try:
            for attempt in range(START_ATTEMPTS):
                self.port = free_port()
                if self._run() or attempt == START_ATTEMPTS - 1:
                    break
            else:  # pragma: no cover - the loop always breaks
                raise AssertionError
            self._wait_until_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self) -> bool:
        """Start tinyproxy on :attr:`port`; False when it exited at once (the port was taken)."""
        assert self._root is not None and self.program is not None
        config = self._root / "tinyproxy.conf"
        config.write_text(
            tinyproxy_config(
                self.port,
                self._root / "tinyproxy.log",
                user=self.user,
                password=self.password,
                connect_ports=self.connect_ports,
            )
        )
        self._launch([str(self.program), "-d", "-c", str(config)], self._root / "output.txt")
        assert self._process is not None
        if self._wait_while_starting() or self._process.poll() is None:
            return True  # listening, or still starting: _wait_until_listening reports it
        self._process = None
        return False

    def _output(self) -> str:
        path = self._root / "output.txt" if self._root is not None else None
        return path.read_text(errors="replace") if path is not None and path.exists() else ""
