"""What hooks and stdio MCP servers start never outlives the cairn process that ran them (real
``cairn`` processes, real child processes, ``setsid`` and double-forked daemons included)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from ..polling import eventually
from ..process_helpers import pid_alive, wait_until_dead
from .conftest import CAIRN, RunCairn, trust_in_user_settings, write_settings

pytestmark = pytest.mark.slow

RAW_SERVER = Path(__file__).parent.parent / "mcp" / "servers" / "raw_server.py"
CHILD_COUNT = 2  # the setsid child and the daemon of a `leaves-children` server
LOADED_DEADLINE = 30.0  # seconds for a killed tree to go on a machine running many suites


def _server_leaving_children(project: Path, pids: Path) -> None:
    server = {
        "command": sys.executable,
        "args": [str(RAW_SERVER), "leaves-children"],
        "env": {"MCP_TEST_CHILD_PIDS": str(pids)},
    }
    write_settings(
        project,
        {"memory": {"enableManagedAutoMemory": False}, "mcpServers": {"leaver": server}},
    )
    trust_in_user_settings(project)


def _children(pids: Path, deadline: float = 90.0) -> list[int]:
    """The PIDs the server's children wrote, once both have (polled up to ``deadline``)."""

    def found() -> list[str]:
        return pids.read_text().split() if pids.exists() else []

    if eventually(lambda: len(found()) >= CHILD_COUNT, deadline):
        return [int(pid) for pid in found()]
    raise AssertionError(f"the server's children never started: {pids}")


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_an_mcp_servers_setsid_children_do_not_outlive_cairn(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """Regression (issue 24): a stdio MCP server's `setsid` child outlived cairn, though no
    server outlives cairn (docs/mcp.md)."""
    pids = tmp_path / "children.pids"
    _server_leaving_children(project, pids)
    # The answer waits until the server has started its children: a first request no longer
    # waits for a slow server, so cairn could otherwise be gone before they exist.
    started, found = threading.Event(), []
    scripted_server.enqueue(reply("Hello.", hold=started))

    def watch() -> None:
        try:
            found.extend(_children(pids))
        finally:
            started.set()

    threading.Thread(target=watch, daemon=True).start()
    done = run_cairn("-p", "hi")

    assert done.returncode == 0, done.stderr
    children = found or _children(pids, deadline=0)
    try:
        assert [pid for pid in children if not wait_until_dead(pid, LOADED_DEADLINE)] == []
    finally:
        _kill_all(children)


def test_an_mcp_servers_children_die_with_a_killed_cairn(
    cairn_env: dict[str, str], scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """cairn killed with SIGKILL runs no exit code of its own: its servers, and what they
    started in sessions of their own, still end with it."""
    pids = tmp_path / "children.pids"
    _server_leaving_children(project, pids)
    scripted_server.enqueue(reply("Too late.", delay=120))  # cairn waits for the model
    cairn = subprocess.Popen(
        [*CAIRN, "-p", "hi"], cwd=project, env=cairn_env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    children: list[int] = []
    try:
        children = _children(pids)
        scripted_server.wait_for_requests(1, timeout=90)
        cairn.kill()
        cairn.wait(timeout=30)
        assert [pid for pid in children if not wait_until_dead(pid, LOADED_DEADLINE)] == []
    finally:
        cairn.kill()
        _kill_all(children)


def test_a_timed_out_hooks_setsid_child_does_not_outlive_cairn(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """Regression (issue 24): a timed-out hook's `setsid` child outlived cairn, though a
    timed-out hook's children are killed (docs/hooks.md)."""
    pid_file = tmp_path / "child.pid"
    hook = {"type": "command", "command": f"setsid sleep 3600 & echo $! > {pid_file}; sleep 60",
            "timeout": 2}  # fmt: skip
    write_settings(
        project,
        {"memory": {"enableManagedAutoMemory": False},
         "hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}},
    )  # fmt: skip
    trust_in_user_settings(project)
    scripted_server.enqueue(reply("Hello."))

    done = run_cairn("-p", "hi")

    assert done.returncode == 0, done.stderr
    child = int(pid_file.read_text())
    try:
        assert wait_until_dead(child, LOADED_DEADLINE), f"the hook's child {child} outlived cairn"
    finally:
        _kill_all([child])
    assert not pid_alive(child)
