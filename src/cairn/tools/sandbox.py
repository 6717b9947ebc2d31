"""A bubblewrap sandbox for shell commands (Linux).

A sandboxed ``run_shell_command`` runs under ``bwrap``: the whole file system read-only, the
workspace (and ``tools.sandbox.writablePaths``) writable, a private ``/tmp``, the user's secrets
(``~/.ssh``, ``~/.aws``, ``~/.config/gh``, ``$CAIRN_HOME``, ...) replaced by empty folders, no
capabilities (also when cairn runs as root),
its own PID namespace (the whole process tree dies with the command) and the network as
``tools.sandbox.network`` says:

- ``none``: a network namespace of its own (only its own loopback; no host service, no internet);
- ``loopback``: as ``none``, plus the TCP ports listening on the host's loopback when the
  command starts, bridged in (:mod:`cairn.tools.sandbox_net`); no internet;
- ``full``: the host's network.

Nothing a command leaves may run later outside the sandbox: what runs or is trusted later stays
read-only however the command goes about it (:func:`protected_mounts`):

- the project's ``.git`` (the folder a ``.git`` file names, and its common folder, too),
  ``.cairn``, ``.claude``, ``.qwen``, ``.agents`` and ``.mcp.json`` at the workspace and the
  project root; one that is absent gets a read-only stand-in (an empty folder made for the
  command and removed after it), so a command cannot create it either;
- the files the configured hooks and stdio MCP servers run (their commands' words naming
  files), wherever they are writable;
- each folder on the way to one of those is a mount point of its own, so it cannot be renamed
  or replaced (``mv .git old && git init``, ``mv scripts old && mkdir scripts``).

The memory agents' read-only shell runs in :func:`read_only_policy` (nothing writable, no
network) when bubblewrap is present. When a sandbox was asked for and bubblewrap is missing or
cannot run, the command is refused with a message naming the package: never a silent
unsandboxed run.

The mounts are computed when a command starts, and the host can change before bwrap makes
them: a service restarting removes a socket the sandbox covers. bwrap then fails its setup
before the command starts, and says so: on its ``--json-status-fd`` it reports an exit code
only for a command that started. The caller then makes the mounts again and starts the command
once more (:func:`setup_failed`, at most :data:`SETUP_ATTEMPTS` runs); a command that started
is never run again, and with a bwrap that reports no exit codes (older than 0.5) nothing is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cairn.tools.base import ToolError

if TYPE_CHECKING:
    from cairn.config.settings import SandboxSettings

__all__ = [
    "BWRAP_PACKAGE",
    "NETWORK_MODES",
    "SANDBOX_ENV",
    "SETUP_ATTEMPTS",
    "NetworkMode",
    "ProtectedMount",
    "RunLater",
    "SandboxPolicy",
    "SandboxUnavailable",
    "bwrap_problem",
    "listening_unix_sockets",
    "protected_mounts",
    "read_only_policy",
    "sandbox_argv",
    "sandbox_policy",
    "sandbox_requested",
    "sandboxed",
    "setup_failed",
    "setup_status_reported",
]

NetworkMode = Literal["none", "loopback", "full"]
NETWORK_MODES: tuple[NetworkMode, ...] = ("none", "loopback", "full")
SANDBOX_ENV = "CAIRN_SANDBOX"  # 1 turns the sandbox on for one run, 0 off
BWRAP_PACKAGE = "bubblewrap"
SANDBOX_TMP = "/tmp"  # noqa: S108 - a fresh tmpfs of the sandbox's own, not the host's /tmp
PROBE_TIMEOUT_SECONDS = 10.0  # the one-time check that bwrap can create its namespaces
# Without a full network, host services' Unix sockets are out of reach: these folders (the
# Docker daemon's, D-Bus's, PostgreSQL's, ...) are hidden, and every other socket listening on
# the host when a command starts (/proc/net/unix) is covered by an empty file.
SOCKET_FOLDERS = ("/run", "/var/run")
PROC_NET_UNIX = Path("/proc/net/unix")
MAX_COVERED_SOCKETS = 4096  # more visible sockets than this: the command is refused
SETUP_ATTEMPTS = 3  # bwrap runs of one command whose setup fails (the host changed), at most
# Secrets a command never needs to read, relative to the home folder.
HIDDEN_HOME_PATHS = (
    ".ssh",
    ".aws",
    ".config/gh",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".kube",
    ".config/gcloud",
    ".azure",
    ".npmrc",
    ".pypirc",
    ".password-store",
)
RunLater = tuple[str, Path]  # a command line cairn runs later, unsandboxed, and its folder
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_probe: dict[str, str | None] = {}  # bwrap path -> why it cannot run (None: it can)
_reports_exit_code: dict[str, bool] = {}  # bwrap path -> its status fd reports exit codes


class SandboxUnavailable(ToolError):
    """A sandbox was asked for and cannot be provided; the command did not run."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a sandboxed command may see and change."""

    workspace: Path
    network: NetworkMode = "none"
    workspace_writable: bool = True
    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()  # bound read-only last: re-exposes or protects
    hidden: tuple[Path, ...] = ()
    sockets: tuple[Path, ...] = ()  # socket folders and files hidden without a full network
    project_root: Path | None = None  # the git root, when the workspace is a folder below it
    scripts: tuple[Path, ...] = ()  # files hooks and MCP servers run: kept read-only

    def writable_roots(self) -> tuple[Path, ...]:
        """The folders a command may write (before what is protected inside them)."""
        found = (self.workspace,) if self.workspace_writable else ()
        return (*found, *self.writable)

    def can_change(self, path: Path) -> bool:
        """Whether a command in this sandbox can change ``path`` on the host (not when it is
        read-only, protected or hidden there: a hidden folder's writes stay in the sandbox)."""
        real = Path(os.path.realpath(path))
        if not any(_within(real, Path(os.path.realpath(r))) for r in self.writable_roots()):
            return False
        from cairn.tools.protected import PROJECT_ENTRIES

        kept = [m.path for m in protected_mounts(self) if m.read_only]
        stand_ins = [root / name for root in self._project_roots() for name in PROJECT_ENTRIES]
        others = (*stand_ins, *self.read_only, *self.hidden)
        fenced = [*kept, *(Path(os.path.realpath(p)) for p in others)]
        return not any(_within(real, path) for path in fenced)

    def _project_roots(self) -> tuple[Path, ...]:
        """Where the project entries are (the workspace, and the git root above it)."""
        return tuple(dict.fromkeys(r for r in (self.workspace, self.project_root) if r))


@dataclass(frozen=True, slots=True)
class ProtectedMount:
    """A mount that keeps something that runs later from changing (:func:`protected_mounts`)."""

    path: Path  # a real path inside a writable folder
    read_only: bool  # False: a folder on the way, bound onto itself so it cannot be renamed


def sandbox_requested(settings: SandboxSettings, environ: Mapping[str, str] = os.environ) -> bool:
    """``CAIRN_SANDBOX`` (set by ``--sandbox``) when set, else ``tools.sandbox.enabled``."""
    value = environ.get(SANDBOX_ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return settings.enabled


def sandbox_policy(
    settings: SandboxSettings,
    *,
    workspace: Path,
    environ: Mapping[str, str] = os.environ,
    run_later: Sequence[RunLater] = (),
) -> SandboxPolicy | None:
    """The main agent's policy, or ``None`` when the sandbox is off. ``run_later``: the
    command lines cairn runs unsandboxed (hooks, stdio MCP servers), whose files stay
    read-only."""
    if not sandbox_requested(settings, environ):
        return None
    from cairn.config.paths import project_root
    from cairn.tools.protected import command_scripts

    return SandboxPolicy(
        workspace=workspace.resolve(),
        network=settings.network,
        writable=tuple(_paths(settings.writable_paths, workspace)),
        read_only=tuple(_paths(settings.read_only_paths, workspace)),
        hidden=tuple(_default_hidden(environ)) + tuple(_paths(settings.hidden_paths, workspace)),
        sockets=tuple(_socket_places(environ)),
        project_root=project_root(workspace),
        scripts=tuple(command_scripts(run_later)),
    )


def read_only_policy(
    workspace: Path, readable: Sequence[Path], environ: Mapping[str, str] = os.environ
) -> SandboxPolicy | None:
    """Nothing writable, no network, ``readable`` visible (even under ``$CAIRN_HOME``); ``None``
    when bubblewrap cannot run here (the caller's command classification still applies)."""
    if bwrap_problem() is not None:
        return None
    return SandboxPolicy(
        workspace=workspace.resolve(),
        network="none",
        workspace_writable=False,
        read_only=tuple(dict.fromkeys(p.resolve() for p in (workspace, *readable))),
        hidden=tuple(_default_hidden(environ)),
        sockets=tuple(_socket_places(environ)),
    )


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox commands here, or ``None`` when it can (checked once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return (
            f"bubblewrap is not installed (install the `{BWRAP_PACKAGE}` package: "
            f"`apt install {BWRAP_PACKAGE}`, `dnf install {BWRAP_PACKAGE}` or "
            f"`pacman -S {BWRAP_PACKAGE}`; the sandbox works on Linux only)"
        )
    if bwrap not in _probe:
        _probe[bwrap] = _run_probe(bwrap)
    return _probe[bwrap]


def _run_probe(bwrap: str) -> str | None:
    command = [bwrap, *_isolation("none"), "--ro-bind", "/", "/", "--", "true"]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=PROBE_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap cannot run ({exc})"
    if done.returncode == 0:
        return None
    detail = done.stderr.decode("utf-8", "replace").strip()
    return (
        f"bubblewrap cannot create its namespaces here ({detail}); unprivileged user "
        "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, or "
        "kernel.apparmor_restrict_unprivileged_userns=0)"
    )


@contextlib.asynccontextmanager
async def sandboxed(
    argv: Sequence[str], policy: SandboxPolicy | None, *, cwd: Path, status_fd: int | None = None
) -> AsyncIterator[list[str]]:
    """The command line to run for ``argv`` under ``policy`` (``None``: unchanged), with the
    loopback bridge running while the block runs (``network: loopback``); bwrap reports on
    ``status_fd`` (passed to it) as :func:`setup_failed_on_a_vanished_path` reads."""
    if policy is None:
        yield list(argv)
        return
    with _stand_ins(policy):
        async with _fenced(argv, policy, cwd=cwd, status_fd=status_fd) as command:
            yield command


def setup_failed(status: bytes, returncode: int | None) -> bool:
    """Whether bwrap, having ended with ``returncode`` and written ``status`` on its status fd
    (:func:`sandboxed`'s ``status_fd``), failed to set the sandbox up, so the command never
    started: it exits 1 then, and reports an exit code only once the command has started."""
    return returncode == 1 and b'"exit-code"' not in status


def setup_status_reported() -> bool:
    """Whether this bwrap reports on ``--json-status-fd`` that a command started (0.5 and
    later), so that :func:`setup_failed` can tell (checked once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or bwrap_problem() is not None:
        return False
    if bwrap not in _reports_exit_code:
        _reports_exit_code[bwrap] = _reports_status(bwrap)
    return _reports_exit_code[bwrap]


def _reports_status(bwrap: str) -> bool:
    read_end, write_end = os.pipe()
    try:
        command = [bwrap, "--json-status-fd", str(write_end), *_isolation("none")]
        subprocess.run(
            [*command, "--ro-bind", "/", "/", "--", "true"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
            pass_fds=(write_end,),
        )
        os.close(write_end)
        write_end = -1
        with os.fdopen(read_end, "rb") as status:
            read_end = -1
            return b'"exit-code"' in status.read()
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        for fd in (read_end, write_end):
            if fd != -1:
                os.close(fd)


@contextlib.asynccontextmanager
async def _fenced(
    argv: Sequence[str], policy: SandboxPolicy, *, cwd: Path, status_fd: int | None
) -> AsyncIterator[list[str]]:
    status = ["--json-status-fd", str(status_fd)] if status_fd is not None else []
    if policy.network != "loopback":
        yield sandbox_argv(argv, policy, cwd=cwd, options=status)
        return
    _require_bwrap()
    from cairn.tools.sandbox_net import (
        INSIDE_FOLDER,
        RELAY_SCRIPT,
        LoopbackBridge,
        listening_loopback_ports,
    )

    bridge = LoopbackBridge(listening_loopback_ports())
    try:
        await bridge.start()
        # The base interpreter, not a venv's link to it: a venv under /tmp is hidden inside.
        python = os.path.realpath(sys.executable)
        relay = [python, "-I", "-S", str(RELAY_SCRIPT), INSIDE_FOLDER, "--"]
        inner = [*relay, *argv]
        yield sandbox_argv(
            inner,
            policy,
            cwd=cwd,
            binds=[(bridge.folder, INSIDE_FOLDER)],
            # visible even when cairn or its Python lives under /tmp or a secret
            read_only=[RELAY_SCRIPT, Path(sys.base_prefix)],
            options=status,
        )
    finally:
        await bridge.aclose()


def sandbox_argv(
    argv: Sequence[str],
    policy: SandboxPolicy,
    *,
    cwd: Path,
    binds: Sequence[tuple[Path, str]] = (),
    read_only: Sequence[Path] = (),
    options: Sequence[str] = (),
) -> list[str]:
    """``argv`` wrapped in bwrap for ``policy`` (``binds``: extra writable folders, host path
    and path inside; ``read_only``: files cairn itself needs inside; ``options``: more of
    bwrap's own); :class:`SandboxUnavailable` when it cannot be."""
    bwrap = _require_bwrap()
    args = [bwrap, *options, *_isolation(policy.network), *_mounts(policy)]
    for source, inside in binds:
        args += ["--bind", str(source), inside]
    for path in read_only:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--setenv", "TMPDIR", SANDBOX_TMP, "--chdir", str(cwd), "--", *argv]
    return args


def _require_bwrap() -> str:
    problem = bwrap_problem()
    bwrap = shutil.which("bwrap")
    if problem is not None or bwrap is None:
        raise SandboxUnavailable(
            f"The shell sandbox is on (tools.sandbox.enabled, --sandbox or {SANDBOX_ENV}=1) "
            f"but {problem}. The command was not run; install it or turn the sandbox off."
        )
    return bwrap


def _isolation(network: NetworkMode) -> list[str]:
    args = [
        "--die-with-parent",  # cairn gone: the sandbox goes too
        "--new-session",  # no TIOCSTI into cairn's terminal
        "--unshare-user",
        "--disable-userns",  # no nested user namespace to gain capabilities in
        "--unshare-pid",  # the whole tree dies with the command's namespace
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",  # root in the sandbox could otherwise remount the file system writable
    ]
    if network != "full":
        args.append("--unshare-net")
    return args


def _mounts(policy: SandboxPolicy) -> list[str]:
    """Later mounts cover earlier ones: secrets go before the workspace is bound (it may live
    under one, as a memory root lives under ``$CAIRN_HOME``), what runs later after every
    writable folder (``writablePaths`` cannot loosen it), secrets inside the workspace after."""
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", SANDBOX_TMP]
    workspace = policy.workspace
    roots = policy.writable_roots()
    inside = [p for p in policy.hidden if any(root in p.parents for root in roots)]
    for path in policy.hidden:
        if path not in inside and path not in roots:
            args += _hide(path)
    if workspace.exists():
        args += ["--bind" if policy.workspace_writable else "--ro-bind"] + [str(workspace)] * 2
    for path in policy.writable:
        if path.exists():
            args += ["--bind", str(path), str(path)]
    for mount in protected_mounts(policy):
        args += ["--ro-bind" if mount.read_only else "--bind", str(mount.path), str(mount.path)]
    for path in inside:
        args += _hide(path)
    if policy.network != "full":
        args += _socket_mounts(policy)
    for path in policy.read_only:
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _socket_mounts(policy: SandboxPolicy) -> list[str]:
    """Host Unix sockets out of reach: their folders hidden, every other listening socket a
    command could see covered by an empty file (a connect to it is refused). Abstract sockets
    need nothing: they belong to the host's network namespace, which the command is not in."""
    bound = [Path(os.path.realpath(p)) for p in policy.writable_roots()]
    args: list[str] = []
    folders: list[Path] = []
    for place in dict.fromkeys(Path(os.path.realpath(p)) for p in policy.sockets):
        if any(_within(root, place) for root in bound) or not os.path.lexists(place):
            continue  # never hide the workspace (nor a folder holding it)
        folders.append(place)
        args += _hide(place)
    unseen = [Path(SANDBOX_TMP), *folders, *(Path(os.path.realpath(p)) for p in policy.hidden)]
    covered = 0
    for path in listening_unix_sockets():
        if any(_within(path, folder) for folder in unseen) and not any(
            _within(path, root) for root in bound
        ):
            continue  # not visible inside: nothing to cover
        covered += 1
        if covered > MAX_COVERED_SOCKETS:
            raise SandboxUnavailable(
                f"more than {MAX_COVERED_SOCKETS} Unix sockets listen on this machine; the "
                "sandbox cannot cover them all, so the command was not run"
            )
        args += ["--ro-bind", os.devnull, str(path)]
    return args


def listening_unix_sockets(proc_net_unix: Path = PROC_NET_UNIX) -> list[Path]:
    """The paths of the Unix sockets bound on the host (not abstract ones), that are sockets
    on disk now (a removed socket file may still be listed)."""
    try:
        lines = proc_net_unix.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return []
    found: dict[Path, None] = {}
    for line in lines[1:]:
        fields = line.split(maxsplit=7)
        if len(fields) < 8 or not fields[7].startswith("/"):
            continue
        path = Path(fields[7])
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(path.lstat().st_mode):
                found[Path(os.path.realpath(path))] = None
    return list(found)


def protected_mounts(policy: SandboxPolicy) -> list[ProtectedMount]:
    """What keeps the things that run later outside the sandbox from changing (the module
    docs), as mounts in the order to make them: a folder before what is inside it."""
    writable = [Path(os.path.realpath(r)) for r in policy.writable_roots() if r.exists()]
    if not writable:
        return []
    kept: list[Path] = []
    for target in _run_later_paths(policy):
        real = Path(os.path.realpath(target))
        if os.path.exists(real) and any(_within(real, root) for root in writable):
            kept.append(real)
    outermost = [p for p in dict.fromkeys(kept) if not any(o in p.parents for o in kept)]
    pins: dict[Path, None] = {}
    for path in outermost:
        base = max((r for r in writable if _within(path, r)), key=lambda r: len(r.parts))
        for folder in reversed(path.parents):
            if base in folder.parents and not any(_within(folder, o) for o in outermost):
                pins[folder] = None
    mounts = [ProtectedMount(p, False) for p in pins]
    mounts += [ProtectedMount(p, True) for p in outermost]
    return sorted(mounts, key=lambda m: len(m.path.parts))


def _run_later_paths(policy: SandboxPolicy) -> Iterator[Path]:
    from cairn.tools.protected import PROJECT_ENTRIES, git_folders

    for root in policy._project_roots():
        yield from git_folders(root)
        for name in PROJECT_ENTRIES:
            if name != ".git" and os.path.lexists(root / name):
                yield root / name
    yield from policy.scripts


@contextlib.contextmanager
def _stand_ins(policy: SandboxPolicy) -> Iterator[list[Path]]:
    """An empty folder for each project entry the workspace lacks, for the time of a command:
    bound read-only, it keeps the command from creating the entry. Removed after (only when
    still empty: nothing another process put there is lost)."""
    from cairn.tools.protected import PROJECT_ENTRIES

    made: list[Path] = []
    if policy.workspace_writable:
        for root in policy._project_roots():
            if not any(_within(Path(os.path.realpath(root)), Path(os.path.realpath(w)))
                       for w in policy.writable_roots()):  # fmt: skip
                continue
            for name in PROJECT_ENTRIES:
                with contextlib.suppress(OSError):  # there already, or the root is gone
                    (root / name).mkdir()
                    made.append(root / name)
    try:
        yield made
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _hide(path: Path) -> list[str]:
    path = Path(os.path.realpath(path))  # a link (~/.ssh -> ~/dotfiles/ssh): where it points
    if not path.exists():
        return []
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", os.devnull, str(path)]


def _default_hidden(environ: Mapping[str, str]) -> Iterator[Path]:
    from cairn.config.paths import cairn_home

    home = Path(environ.get("HOME") or Path.home())
    for path in (*(home / name for name in HIDDEN_HOME_PATHS), cairn_home()):
        yield Path(os.path.realpath(path))  # a secret that is a link is hidden where it points


def _socket_places(environ: Mapping[str, str]) -> Iterator[Path]:
    """Where host services keep the Unix sockets a command must not reach without a full
    network: the system's and the user's runtime folders, the ssh agent's socket."""
    yield from (Path(folder) for folder in SOCKET_FOLDERS)
    for name in ("XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"):
        value = environ.get(name, "")
        if value.startswith("/"):
            yield Path(value)


def _paths(raw: Sequence[str], workspace: Path) -> Iterator[Path]:
    for text in raw:
        path = Path(os.path.expandvars(text)).expanduser()
        with contextlib.suppress(OSError, RuntimeError):
            yield (path if path.is_absolute() else workspace / path).resolve()
