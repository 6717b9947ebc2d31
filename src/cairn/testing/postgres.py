"""A throw-away PostgreSQL server for tests and benchmarks: ``initdb`` and ``pg_ctl`` in a temp dir.

The cluster listens on a free loopback port (and a Unix socket in its own folder), trusts local
connections, and is removed when stopped. Run as root, the server runs as an unprivileged user
(``nobody``), since PostgreSQL refuses to run as root::

    with PostgresServer() as server:
        dsn = server.create_database("t1")   # postgresql://cairn@127.0.0.1:<port>/t1

The binaries come from ``PATH`` or the Debian layout (``/usr/lib/postgresql/<version>/bin``);
:func:`find_postgres_bin` says where, or None when the server is not installed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["PostgresServer", "PostgresUnavailable", "find_postgres_bin"]

SUPERUSER = "cairn"  # the cluster's superuser (tests create less privileged roles themselves)
START_TIMEOUT_SECONDS = 60
_UNPRIVILEGED = "nobody"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_postgres_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (newest Debian version first), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent  # a symlink's folder may lack createdb

    def version(path: str) -> int:
        name = Path(path).parent.parent.name
        return int(name) if name.isdigit() else 0

    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True)
    return Path(candidates[0]).parent if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in a temp dir, for as long as the ``with`` block (or start/stop)."""

    def __init__(self, *, bin_dir: Path | None = None) -> None:
        self.bin_dir = bin_dir or find_postgres_bin()
        self.port = 0
        self._root: Path | None = None

    @property
    def running(self) -> bool:
        return self._root is not None

    def dsn(self, database: str = "postgres", *, user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        if self.bin_dir is None:
            raise PostgresUnavailable(
                "PostgreSQL is not installed (no initdb found): apt-get install -y postgresql"
            )
        root = Path(tempfile.mkdtemp(prefix="cairn-postgres-"))
        self._root = root
        try:
            self._own(root)
            self._run("initdb", "-D", str(root / "data"), "-U", SUPERUSER, "--auth=trust",
                      "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip
            self.port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={root} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=200"
            )
            self._run("pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"), "-w",
                      "-t", str(START_TIMEOUT_SECONDS), "-o", options, "start")  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def create_role(self, name: str) -> None:
        """An ordinary login role (row-level security applies to it, unlike the superuser)."""
        self._run("createuser", "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, name)

    def create_database(self, name: str, *, owner: str = SUPERUSER) -> str:
        """A new empty database owned by ``owner``; its DSN as that owner."""
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER,
                  "-O", owner, name)  # fmt: skip
        return self.dsn(name, user=owner)

    def stop(self) -> None:
        root, self._root = self._root, None
        if root is None:
            return
        if (root / "data" / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._run("pg_ctl", "-D", str(root / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _own(self, root: Path) -> None:
        if os.geteuid() != 0:
            return
        user = pwd.getpwnam(_UNPRIVILEGED)
        os.chown(root, user.pw_uid, user.pw_gid)
        root.chmod(0o700)

    def _run(self, program: str, *args: str) -> None:
        assert self.bin_dir is not None
        command = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            user = pwd.getpwnam(_UNPRIVILEGED)
            command = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                       "--clear-groups", *command]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = ""
            if self._root is not None and (self._root / "server.log").exists():
                log = (self._root / "server.log").read_text(errors="replace")[-2000:]
            problem = done.stderr.strip()
            raise RuntimeError(f"{program} failed ({done.returncode}): {problem}\n{log}")
