"""A throw-away PostgreSQL server for tests and benchmarks: a cluster in a temp dir.

The cluster listens on a free loopback port (and a Unix socket in its own folder), trusts local
connections, and is removed when stopped. The server is a child of the process that starts it
and gets SIGQUIT (PostgreSQL's immediate shutdown) when that thread's process dies, even by
SIGKILL, so a killed test run leaves no server behind: start it from a thread that lives as long
as it does (the main thread). Run as root, the server runs as an unprivileged user (``nobody``),
since PostgreSQL refuses to run as root::

    with PostgresServer() as server:
        dsn = server.create_database("t1")   # postgresql://cairn@127.0.0.1:<port>/t1

A run killed before it stopped its cluster (SIGKILL, a timeout) leaves the folder behind (a
cluster's is about 40 MB, up to 170 MB after the tests that fill it). So each cluster's folder
holds a lock file, ``owner.lock``, locked (``flock``) by the process that started the cluster and
inherited by its server, and it appears under its name already locked (it is made under a hidden
name and renamed): :func:`remove_stale_clusters`, run by every :meth:`PostgresServer.start`,
removes the ``cairn-postgres-*`` folders whose lock it can take, those whose owner and server are
gone, and never one in use. A folder without the lock file (left by a version before it) is
removed only when no process names it on its command line (its ``initdb`` or server) and
nothing in it changed for :data:`LEGACY_STALE_SECONDS`.

The binaries (:data:`PROGRAMS`) come from ``PATH`` or the Debian layout
(``/usr/lib/postgresql/<version>/bin``); :func:`find_postgres_bin` says where, or None when they
are not all installed. ``.ci/system-packages`` installs them, checking the same list.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from cairn.testing._service import Service

__all__ = [
    "PROGRAMS",
    "PostgresServer",
    "PostgresUnavailable",
    "find_postgres_bin",
    "remove_stale_clusters",
]

# What the server below runs, all from one folder (.ci/system-packages checks the same list).
PROGRAMS = ("initdb", "postgres", "createuser", "createdb")

SUPERUSER = "cairn"  # the cluster's superuser (tests create less privileged roles themselves)
START_TIMEOUT_SECONDS = 60
_UNPRIVILEGED = "nobody"
FOLDER_PREFIX = "cairn-postgres-"  # a cluster's folder in the temp dir
LOCK_NAME = "owner.lock"  # in it: locked while its owner or its server lives
LEGACY_STALE_SECONDS = 3600.0  # a folder without the lock file, unchanged this long, is stale


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_postgres_bin() -> Path | None:
    """The folder holding all of :data:`PROGRAMS`: ``initdb``'s on ``PATH``, else the newest
    Debian version's; None when there is none."""

    def version(path: str) -> int:
        name = Path(path).parent.parent.name
        return int(name) if name.isdigit() else 0

    found = shutil.which("initdb")
    on_path = [os.path.realpath(found)] if found else []  # a symlink's folder may lack createdb
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True)
    for initdb in (*on_path, *debian):
        folder = Path(initdb).parent
        if all(os.access(folder / program, os.X_OK) for program in PROGRAMS):
            return folder
    return None


def remove_stale_clusters(temp_dir: Path | None = None) -> list[Path]:
    """Remove the cluster folders in ``temp_dir`` (default: the temp dir) that no live process
    owns; the folders removed. A folder with the lock file is stale when its lock can be taken
    (the lock ends with the last process holding it: the owner and its server); one without it
    (an older version's) when no process names it and it has not changed for an hour."""
    folder = Path(temp_dir or tempfile.gettempdir())
    removed: list[Path] = []
    command_lines: str | None = None  # read once, if a folder without the lock file needs it
    for root in sorted(folder.glob(f"{FOLDER_PREFIX}*")):
        if not root.is_dir() or root.is_symlink():
            continue
        lock = root / LOCK_NAME
        if lock.exists():
            if _remove_if_unlocked(root, lock):
                removed.append(root)
            continue
        if command_lines is None:
            command_lines = _command_lines()
        # named as ``-D <root>/data`` by its initdb or server, if they live
        if _unchanged_for(root, LEGACY_STALE_SECONDS) and str(root) not in command_lines:
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
    return removed


def _remove_if_unlocked(root: Path, lock: Path) -> bool:
    try:
        descriptor = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:  # gone meanwhile, or another user's
        return False
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its owner or its server lives
            return False
        shutil.rmtree(root, ignore_errors=True)
        return True
    finally:
        os.close(descriptor)


def _command_lines() -> str:
    """Every running process's command line, arguments and processes each ended by a NUL."""
    lines = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            lines.append(os.fsdecode((entry / "cmdline").read_bytes()))
    return "\0".join(lines) + "\0"


def _unchanged_for(root: Path, seconds: float) -> bool:
    """Whether neither ``root`` nor anything directly in it changed for ``seconds``."""
    try:
        newest = max([root.stat().st_mtime, *(c.lstat().st_mtime for c in root.iterdir())])
    except OSError:  # gone, or not ours to read: not known to be stale
        return False
    return time.time() - newest > seconds


def _claim_folder() -> tuple[Path, int]:
    """A new cluster folder in the temp dir with its lock file locked by this process (the
    descriptor, not inherited by children unless passed): made under a hidden name, so that it
    never shows under :data:`FOLDER_PREFIX` unlocked."""
    staging = Path(tempfile.mkdtemp(prefix=f".{FOLDER_PREFIX}"))
    try:
        descriptor = os.open(staging / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        root = staging.with_name(staging.name[1:])
        if root.exists():
            raise FileExistsError(root)
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return root, descriptor


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer(Service):
    """One PostgreSQL cluster in a temp dir, for as long as the ``with`` block (or start/stop)."""

    def __init__(self, *, bin_dir: Path | None = None) -> None:
        self.bin_dir = bin_dir or find_postgres_bin()
        self.port = 0
        self._root: Path | None = None
        self._lock: int | None = None  # the descriptor of the folder's locked lock file
        self._server: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._root is not None

    @property
    def root(self) -> Path:
        """The cluster's temp folder (data, socket, ``server.log``) while it runs."""
        return self._running()[0]

    @property
    def pid(self) -> int:
        """The server's (postmaster's) process id while it runs."""
        return self._running()[1].pid

    def _running(self) -> tuple[Path, subprocess.Popen[bytes]]:
        if self._root is None or self._server is None:
            raise RuntimeError("the PostgreSQL server is not running")
        return self._root, self._server

    def dsn(self, database: str = "postgres", *, user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        if self.bin_dir is None:
            raise PostgresUnavailable(
                "PostgreSQL is not installed (no initdb found): apt-get install -y postgresql"
            )
        with contextlib.suppress(OSError):  # best effort: another run may be removing them too
            remove_stale_clusters()
        root, self._lock = _claim_folder()
        self._root = root
        try:
            self._own(root)
            self._run("initdb", "-D", str(root / "data"), "-U", SUPERUSER, "--auth=trust",
                      "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip
            self.port = _free_port()
            self._serve(root)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self) -> None:
        """Stop the server as an operator does (a fast shutdown: every connection is ended) and
        start it again on the same port and data."""
        root, server = self._running()
        server.send_signal(signal.SIGINT)
        server.wait(timeout=START_TIMEOUT_SECONDS)
        self._serve(root)

    def _serve(self, root: Path) -> None:
        self._server = self._spawn(
            "postgres", "-D", str(root / "data"), "-c", "listen_addresses=127.0.0.1",
            "-p", str(self.port), "-c", f"unix_socket_directories={root}", "-c", "fsync=off",
            "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            "-c", "max_connections=200", log=root / "server.log",
        )  # fmt: skip
        self._wait_until_ready(root / "data" / "postmaster.pid")

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
        server, self._server = self._server, None
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGQUIT)  # immediate shutdown: a throw-away cluster
            try:
                server.wait(timeout=START_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        lock, self._lock = self._lock, None
        if lock is not None:
            os.close(lock)

    def _own(self, root: Path) -> None:
        if os.geteuid() != 0:
            return
        user = pwd.getpwnam(_UNPRIVILEGED)
        os.chown(root, user.pw_uid, user.pw_gid)
        root.chmod(0o700)

    def _command(self, program: str, *args: str, die_with_parent: bool = False) -> list[str]:
        assert self.bin_dir is not None
        command = [str(self.bin_dir / program), *args]
        wrapper: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam(_UNPRIVILEGED)
            wrapper = [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        if die_with_parent and shutil.which("setpriv"):
            wrapper.append("--pdeathsig=SIGQUIT")  # set after the user change, which clears it
        return ["setpriv", *wrapper, *command] if wrapper else command

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            self._command(program, *args), capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()}")

    def _spawn(self, program: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
        """The server, holding the folder's lock too: while it lives, its folder is in use."""
        with log.open("ab") as output:
            return subprocess.Popen(
                self._command(program, *args, die_with_parent=True),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=() if self._lock is None else (self._lock,),
            )

    def _wait_until_ready(self, pid_file: Path) -> None:
        """Until the server says it accepts connections (line 8 of ``postmaster.pid``, as
        ``pg_ctl -w`` reads it); a server that exits or stays starting is an error with its log."""
        assert self._server is not None
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._server.poll() is not None:
                break
            with contextlib.suppress(OSError):
                lines = pid_file.read_text().splitlines()
                if len(lines) >= 8 and lines[7].strip() == "ready":
                    return
            time.sleep(0.05)
        log = (pid_file.parent.parent / "server.log").read_text(errors="replace")[-2000:]
        ended = self._server.returncode
        status = f"exited with {ended}" if ended is not None else "was not ready in time"
        raise RuntimeError(f"postgres {status}:\n{log}")
