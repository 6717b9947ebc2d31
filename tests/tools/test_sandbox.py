"""run_shell_command under real bubblewrap: what a sandboxed command can and cannot do."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.config.settings import SandboxSettings, Settings
from cairn.tools.base import ToolContext, ToolResult
from cairn.tools.sandbox import (
    SandboxPolicy,
    read_only_policy,
    sandbox_policy,
    sandbox_requested,
)
from cairn.tools.sandbox_net import listening_loopback_ports
from cairn.tools.shell import ShellTool

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)"
)


# Unix sockets are visible host-wide (/proc/net/unix), and every sandboxed command mounts the
# ones it lists: a test that makes and removes sockets races another worker's sandbox set-up.
# bwrap's set-up is retried (SETUP_ATTEMPTS), but a test that removes three sockets in a row
# outlasted those retries in a concurrent test (CI, 23:30 2026-12-02). They run one at a time.
_HOST_SOCKETS = pytest.mark.xdist_group("host_sockets")

@pytest.fixture
def base() -> Iterator[Path]:
    """A folder outside /tmp: the sandbox's /tmp is private, so paths under the host's /tmp
    are out of a command's sight anyway and would prove nothing."""
    folder = Path(tempfile.mkdtemp(prefix="cairn-sandbox-test-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with secrets, and a cairn home beside it."""
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".ssh" / "known_hosts").write_text("github.com ssh-ed25519 AAAA\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = X\n")
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text("oauth_token: gho_X\n")
    cairn_home = base / "cairn-home"
    cairn_home.mkdir()
    (cairn_home / "settings.json").write_text('{"security": {"auth": {"apiKey": "sk-X"}}}\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CAIRN_HOME", str(cairn_home))
    monkeypatch.delenv("CAIRN_SANDBOX", raising=False)
    return home


@pytest.fixture
def workspace(base: Path, home: Path) -> Path:
    root = base / "workspace"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".cairn").mkdir()
    (root / ".cairn" / "settings.json").write_text("{}\n")
    return root


def _policy(workspace: Path, **settings: object) -> SandboxPolicy:
    policy = sandbox_policy(
        SandboxSettings.model_validate({"enabled": True, **settings}), workspace=workspace
    )
    assert policy is not None
    return policy


async def _run(
    command: str, workspace: Path, policy: SandboxPolicy | None, *, timeout: float = 30
) -> ToolResult:
    ctx = ToolContext(
        workspace=workspace,
        abort=AbortController().signal,
        shell_timeout=timeout,
        sandbox=policy,
    )
    return await ShellTool().execute({"command": command}, ctx)


def _text(result: ToolResult) -> str:
    return result.output if result.ok else str(result.error)


async def test_a_command_writes_the_workspace_and_nothing_else(workspace: Path, home: Path) -> None:
    result = await _run(
        f"echo made > inside.txt && echo ok; echo x > {home}/outside.txt; echo y > /etc/cairn-x;"
        " echo z > /usr/cairn-x",
        workspace,
        _policy(workspace),
    )

    assert (workspace / "inside.txt").read_text() == "made\n"
    assert not (home / "outside.txt").exists()
    assert not Path("/etc/cairn-x").exists() and not Path("/usr/cairn-x").exists()
    assert _text(result).count("Read-only file system") == 3


async def test_tmp_is_private_to_the_command(workspace: Path) -> None:
    marker = f"cairn-sandbox-{os.getpid()}"

    result = await _run(
        f"echo hi > /tmp/{marker} && cat /tmp/{marker}", workspace, _policy(workspace)
    )

    assert "hi" in _text(result)
    assert not Path("/tmp", marker).exists()


async def test_secrets_and_the_cairn_home_are_hidden(workspace: Path, home: Path) -> None:
    result = await _run(
        f"cat {home}/.ssh/id_ed25519 {home}/.aws/credentials {home}/.config/gh/hosts.yml "
        f"$CAIRN_HOME/settings.json; ls -A {home}/.ssh | wc -l",
        workspace,
        _policy(workspace),
    )

    text = _text(result)
    for secret in ("PRIVATE KEY", "aws_secret", "gho_X", "sk-X"):
        assert secret not in text
    assert text.count("No such file or directory") == 4
    assert "\n0\n" in text  # ~/.ssh is an empty folder


async def test_hooks_git_config_and_project_settings_stay_read_only(workspace: Path) -> None:
    result = await _run(
        "echo evil > .git/hooks/pre-commit; echo evil >> .git/config; "
        "echo '{}' > .cairn/settings.json; echo fine > ok.txt",
        workspace,
        _policy(workspace),
    )

    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert (workspace / ".cairn" / "settings.json").read_text() == "{}\n"
    assert (workspace / "ok.txt").exists()
    assert _text(result).count("Read-only file system") == 3


async def test_extra_writable_read_only_and_re_exposed_paths(
    workspace: Path, home: Path, base: Path
) -> None:
    cache = base / "cache"
    cache.mkdir()
    (workspace / "vendor").mkdir()
    policy = _policy(
        workspace,
        writablePaths=[str(cache)],
        readOnlyPaths=["vendor", "~/.ssh/known_hosts"],
    )

    result = await _run(
        f"echo c > {cache}/c.txt; echo v > vendor/v.txt; cat ~/.ssh/known_hosts; "
        "cat ~/.ssh/id_ed25519",
        workspace,
        policy,
    )

    assert (cache / "c.txt").exists()
    assert not (workspace / "vendor" / "v.txt").exists()
    text = _text(result)
    assert "github.com ssh-ed25519" in text and "PRIVATE KEY" not in text


async def test_root_in_the_sandbox_cannot_remount_or_unhide(workspace: Path, home: Path) -> None:
    """Regression guard: bwrap run by root keeps every capability unless told to drop them,
    and `mount -o remount,rw /` then made the whole host file system writable."""
    result = await _run(
        f"mount -o remount,rw / && echo REMOUNTED; umount {home}/.ssh && echo UNHIDDEN; "
        "echo x > /etc/cairn-remount-x",
        workspace,
        _policy(workspace),
    )

    text = _text(result)
    assert "REMOUNTED" not in text and "UNHIDDEN" not in text
    assert not Path("/etc/cairn-remount-x").exists()


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on the host's loopback that answers every connection with "pong"."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"pong\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join()
    server.close()


def _client(host: str, port: int) -> str:
    return (
        "python3 -c \"import socket; s = socket.create_connection(('"
        f"{host}', {port}), timeout=3); print('GOT', s.recv(10).decode().strip())\""
    )


async def test_network_none_reaches_no_tcp_port(workspace: Path, host_server: int) -> None:
    result = await _run(_client("127.0.0.1", host_server), workspace, _policy(workspace))

    assert "GOT pong" not in _text(result)
    assert "Connection refused" in _text(result)


async def test_network_full_reaches_the_host(workspace: Path, host_server: int) -> None:
    result = await _run(
        _client("127.0.0.1", host_server), workspace, _policy(workspace, network="full")
    )

    assert "GOT pong" in _text(result)


async def test_network_loopback_reaches_host_services_and_nothing_else(
    workspace: Path, host_server: int
) -> None:
    assert host_server in listening_loopback_ports()
    outside = _external_address()
    command = _client("127.0.0.1", host_server)
    if outside is not None:
        command += "; " + _client(outside, 9) + " || echo NO-ROUTE"

    result = await _run(command, workspace, _policy(workspace, network="loopback"))

    text = _text(result)
    assert "GOT pong" in text
    if outside is not None:
        assert "NO-ROUTE" in text


def _external_address() -> str | None:
    """This machine's address on its default route, if it has one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.254", 9))
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else str(address)


async def _gone(marker: str) -> list[int]:
    """Processes whose command line holds ``marker`` once the kernel has torn the sandbox's
    PID namespace down (it kills the rest of the tree just after the command's own process)."""
    for _ in range(100):
        left = _processes_with(marker)
        if not left:
            return []
        await asyncio.sleep(0.05)
    return _processes_with(marker)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


async def test_a_runaway_command_is_killed_with_all_its_children(workspace: Path) -> None:
    marker = f"31{os.getpid() % 1000:03d}.25"
    command = f"setsid sleep {marker} & (sleep {marker} &) ; sleep {marker}"

    result = await _run(command, workspace, _policy(workspace), timeout=1)

    assert result.error is not None and "timed out" in result.error
    assert await _gone(f"sleep\0{marker}") == []


async def test_background_processes_end_with_the_command(workspace: Path) -> None:
    marker = f"32{os.getpid() % 1000:03d}.5"

    result = await _run(f"nohup sleep {marker} >/dev/null 2>&1 & echo started", workspace,
                        _policy(workspace))  # fmt: skip

    assert "started" in _text(result)
    assert await _gone(f"sleep\0{marker}") == []


async def test_without_bubblewrap_the_command_is_refused_with_the_package_name(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("bash", "touch"):
        found = shutil.which(program)
        assert found is not None
        (bin_dir / program).symlink_to(found)
    policy = _policy(workspace)
    monkeypatch.setenv("PATH", str(bin_dir))

    result = await _run("touch ran.txt", workspace, policy)

    assert result.error is not None
    assert "bubblewrap" in result.error and "not run" in result.error
    assert not (workspace / "ran.txt").exists()


async def test_the_read_only_sandbox_writes_nothing_and_sees_only_its_roots(
    home: Path,
) -> None:
    cairn_home = Path(os.environ["CAIRN_HOME"])
    memory = cairn_home / "projects" / "p" / "memory"
    memory.mkdir(parents=True)
    (memory / "fact.md").write_text("a fact\n")
    policy = read_only_policy(memory, [memory])
    assert policy is not None

    result = await _run(
        f"cat fact.md; echo x > new.md; cat {cairn_home}/settings.json", memory, policy
    )

    text = _text(result)
    assert "a fact" in text and "sk-X" not in text
    assert not (memory / "new.md").exists()
    assert "Read-only file system" in text


def test_the_environment_turns_the_sandbox_on_or_off_for_one_run() -> None:
    off, on = SandboxSettings(), SandboxSettings(enabled=True)

    assert sandbox_requested(off, {"CAIRN_SANDBOX": "1"})
    assert not sandbox_requested(on, {"CAIRN_SANDBOX": "0"})
    assert sandbox_requested(on, {}) and not sandbox_requested(off, {})


def test_true_is_short_for_an_enabled_sandbox_and_a_container_name_is_refused() -> None:
    assert Settings.model_validate({"tools": {"sandbox": True}}).tools.sandbox.enabled
    with pytest.raises(ValueError, match="bubblewrap, not a container"):
        Settings.model_validate({"tools": {"sandbox": "docker"}})


def test_the_memory_agents_tool_context_carries_the_read_only_sandbox(home: Path) -> None:
    from cairn.memory.background.agent_tools import MemoryFiles, memory_agent_context

    memory = Path(os.environ["CAIRN_HOME"]) / "projects" / "p" / "memory"
    memory.mkdir(parents=True)
    ctx = memory_agent_context(
        workspace=memory,
        writable=[memory],
        readable=[],
        files=MemoryFiles(),
        abort=AbortController().signal,
    )

    assert ctx.sandbox is not None
    assert not ctx.sandbox.workspace_writable and ctx.sandbox.network == "none"
    assert memory.resolve() in ctx.sandbox.read_only


def test_files_cairn_needs_inside_are_visible_even_under_the_private_tmp(
    workspace: Path, tmp_path: Path
) -> None:
    """Regression: the loopback relay script of a cairn installed under /tmp was hidden by the
    sandbox's own /tmp, and every `loopback` command failed."""
    from cairn.tools.sandbox import sandbox_argv

    script = tmp_path / "relay.py"  # pytest's tmp_path is under the host's /tmp
    script.write_text("print('relay here')\n")

    argv = sandbox_argv(
        ["cat", str(script)], _policy(workspace), cwd=workspace, read_only=[script]
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    assert done.stdout == "print('relay here')\n", done.stderr


@_HOST_SOCKETS
async def test_a_secret_folder_that_is_a_link_is_hidden_where_it_points(
    workspace: Path, home: Path, base: Path
) -> None:
    """Regression (issue 24): `~/.ssh -> ~/dotfiles/ssh` was not hidden: the key was printed."""
    dotfiles = base / "dotfiles"
    shutil.move(home / ".ssh", dotfiles / "ssh")
    (home / ".ssh").symlink_to(dotfiles / "ssh")
    (dotfiles / "netrc").write_text("machine x password NETRC-SECRET\n")
    (home / ".netrc").symlink_to(dotfiles / "netrc")

    result = await _run(
        f"cat ~/.ssh/id_ed25519 {dotfiles}/ssh/id_ed25519 ~/.netrc {dotfiles}/netrc",
        workspace,
        _policy(workspace),
    )

    text = _text(result)
    assert "PRIVATE KEY" not in text and "NETRC-SECRET" not in text


def _unix_server(path: str) -> socket.socket:
    """A Unix socket server answering every connection with "pong" (an abstract one when
    ``path`` starts with a NUL)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"pong\n")

    threading.Thread(target=serve, daemon=True).start()
    return server


def _unix_client(path: str) -> str:
    return (
        "python3 -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); "
        f"s.settimeout(3); s.connect({path!r}); print('GOT', s.recv(10).decode().strip())\""
        " 2>&1 | tail -1"
    )


@pytest.mark.parametrize("network", ["none", "loopback"])
@_HOST_SOCKETS
async def test_network_none_reaches_no_host_unix_socket(
    workspace: Path, base: Path, monkeypatch: pytest.MonkeyPatch, network: str
) -> None:
    """Regression (issue 24): `network: none` still connected to host Unix sockets (the Docker
    daemon, ssh-agent, PostgreSQL, X11) wherever the command could see them."""
    runtime = base / "run-user"
    agent = base / "agent"
    services = base / "services"
    for folder in (runtime, agent, services):
        folder.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent / "agent.sock"))
    paths = [
        str(runtime / "bus"),  # $XDG_RUNTIME_DIR
        str(agent / "agent.sock"),  # the ssh agent's socket
        str(services / ".s.PGSQL.5432"),  # a service's socket anywhere else (/var/run/...)
        str(workspace / "dev.sock"),  # one in the workspace itself
        f"\0cairn-test-{os.getpid()}-{network}",  # an abstract one (X11's @/tmp/.X11-unix/X0)
    ]
    servers = [_unix_server(path) for path in paths]
    try:
        for path in paths:
            assert "GOT pong" in subprocess.run(
                ["bash", "-c", _unix_client(path)], capture_output=True, text=True, timeout=30
            ).stdout  # reachable outside the sandbox

            result = await _run(_unix_client(path), workspace, _policy(workspace, network=network))

            assert "GOT pong" not in _text(result), path
    finally:
        for server in servers:
            server.close()


def _bwrap_wrapper(folder: Path, sockets: list[Path], *, removes: str) -> Path:
    """A ``bwrap`` first on PATH that runs the real one, a host service going away (the first
    of ``sockets`` still there that bwrap is asked to cover has its file removed, and is
    logged in ``folder/removed``) just ``before`` bwrap starts or just ``after`` it ends."""
    real = shutil.which("bwrap")
    assert real is not None
    folder.mkdir()
    remove = "".join(
        f'if [ -S "{sock}" ]; then case " $* " in *" {sock} "*)'
        f' rm -f "{sock}"; echo "{sock}" >> "{folder}/removed"; exit_now=1;; esac; fi\n'
        f'[ -n "$exit_now" ] || \\\n'
        for sock in sockets
    ) + "true\n"
    if removes == "before":
        body = f'{remove}exec "{real}" "$@"\n'
    else:
        body = f'"{real}" "$@"\nstatus=$?\n{remove}exit $status\n'
    wrapper = folder / "bwrap"
    wrapper.write_text(f"#!/bin/sh\n{body}")
    wrapper.chmod(0o755)
    return folder


@_HOST_SOCKETS
async def test_a_socket_gone_before_bwrap_mounts_it_does_not_fail_the_command(
    workspace: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 24): a host service's socket removed between the listing of
    /proc/net/unix and bwrap's mounts (a service restarting) failed the command unrun with
    "bwrap: Can't bind mount /oldroot/dev/null on /newroot/.../.s.PGSQL.5432" and exit code 1.
    Its setup failed before the command started: it runs once, on mounts made again."""
    (base / "services").mkdir()
    sock = base / "services" / ".s.PGSQL.5432"
    server = _unix_server(str(sock))
    bin_dir = _bwrap_wrapper(base / "bin", [sock], removes="before")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    try:
        result = await _run("echo ran >> runs.txt; echo done", workspace, _policy(workspace))
    finally:
        server.close()

    assert result.ok, result.error
    assert "done" in result.output and "bwrap" not in result.output
    assert result.output.rstrip().endswith("Exit code: 0")
    assert (workspace / "runs.txt").read_text() == "ran\n"  # once, never twice


@_HOST_SOCKETS
async def test_a_command_that_ran_and_failed_is_not_run_again(
    workspace: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's own failure, with a covered socket gone by the time it ends, is its
    result: only a sandbox whose setup failed before the command started is made again."""
    (base / "services").mkdir()
    sock = base / "services" / "app.sock"
    server = _unix_server(str(sock))
    bin_dir = _bwrap_wrapper(base / "bin", [sock], removes="after")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    try:
        result = await _run("echo ran >> runs.txt; exit 1", workspace, _policy(workspace))
    finally:
        server.close()

    assert result.output.rstrip().endswith("Exit code: 1")
    assert not sock.exists()  # the wrapper did remove it after the run
    assert (workspace / "runs.txt").read_text() == "ran\n"


@_HOST_SOCKETS
async def test_a_sandbox_that_cannot_be_set_up_is_tried_three_times_and_the_command_never_runs(
    workspace: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host whose sockets keep going away under bwrap (a service restarting again and
    again): bwrap's own failure is the result after 3 tries, and the command never ran."""
    (base / "services").mkdir()
    sockets = [base / "services" / f"s{i}.sock" for i in range(5)]
    servers = [_unix_server(str(sock)) for sock in sockets]
    bin_dir = _bwrap_wrapper(base / "bin", sockets, removes="before")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    try:
        result = await _run("echo ran >> runs.txt", workspace, _policy(workspace))
    finally:
        for server in servers:
            server.close()

    assert "bwrap: " in result.output and result.output.rstrip().endswith("Exit code: 1")
    assert (base / "bin" / "removed").read_text().splitlines() == [str(s) for s in sockets[:3]]
    assert not (workspace / "runs.txt").exists()
