"""The throw-away PostgreSQL server of ``cairn.testing.postgres``, as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.testing.postgres import (
    FOLDER_PREFIX,
    LEGACY_STALE_SECONDS,
    PostgresServer,
    find_postgres_bin,
    remove_stale_clusters,
)

from ..polling import eventually
from ..process_helpers import pid_alive, wait_until_dead

pytestmark = [
    pytest.mark.slow,  # real PostgreSQL servers
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        find_postgres_bin() is None,
        reason="PostgreSQL is not installed (.ci/system-packages installs it)",
    ),
]

HOLDER = """
import json, sys, time
from cairn.testing.postgres import PostgresServer

server = PostgresServer().start()
print(json.dumps({"root": str(server.root), "pid": server.pid}), flush=True)
time.sleep(600)
"""


def test_stopping_leaves_no_server_and_no_folder() -> None:
    with PostgresServer() as server:
        root, pid = server.root, server.pid
        assert pid_alive(pid)
        assert server.create_database("t1").endswith(f":{server.port}/t1")

    assert wait_until_dead(pid)
    assert not root.exists()


def test_a_killed_test_process_takes_its_server_with_it(tmp_path: Path) -> None:
    """Regression: a pytest run killed with SIGKILL left its cluster running (``pg_ctl start``
    daemonizes the server, so nothing tied it to the process that started it)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert holder.stdout is not None
    started = json.loads(holder.stdout.readline())
    assert pid_alive(started["pid"])

    holder.send_signal(signal.SIGKILL)
    holder.wait()

    assert wait_until_dead(started["pid"])


def test_a_killed_runs_folder_is_removed_and_a_live_runs_never_is(tmp_path: Path) -> None:
    """Regression: every killed run left its cluster's folder in the temp dir (60 of them, up to
    170 MB each, were found); the next server's start removes those whose owner is gone."""
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, cwd=tmp_path
        )
        for _ in range(2)
    ]
    try:
        killed = holders[0]
        started = []
        for holder in holders:
            assert holder.stdout is not None
            started.append(json.loads(holder.stdout.readline()))
        gone, kept = (Path(s["root"]) for s in started)
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert wait_until_dead(started[0]["pid"])
        assert gone.exists()  # what the kill leaves

        with PostgresServer() as server:  # its start removes the stale folder
            assert not gone.exists()
            assert kept.exists() and pid_alive(started[1]["pid"])
            assert server.root.exists()
            assert remove_stale_clusters() == []  # the live ones are in use
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
    assert wait_until_dead(started[1]["pid"])  # its owner killed now, its server follows
    assert eventually(lambda: kept in remove_stale_clusters(kept.parent) or not kept.exists())


def test_a_folder_of_an_older_version_is_removed_only_when_unused_for_long(
    tmp_path: Path,
) -> None:
    """Folders without the lock file (left by killed runs of a version before it): removed when
    unchanged for an hour and named by no process; kept while changed lately or named by a
    process (a running server or initdb of such a version: ``-D <folder>/data``)."""
    old = time.time() - LEGACY_STALE_SECONDS - 60
    folders = {name: tmp_path / f"{FOLDER_PREFIX}{name}" for name in ("stale", "fresh", "named")}
    for folder in folders.values():
        (folder / "data").mkdir(parents=True)
        (folder / "server.log").write_text("")
    for name in ("stale", "named"):
        for path in (folders[name] / "data", folders[name] / "server.log", folders[name]):
            os.utime(path, (old, old))
    user = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-D", str(folders["named"] / "data")]
    )
    command_line = Path(f"/proc/{user.pid}/cmdline")
    try:  # a process's command line reads empty while its exec is still under way
        assert eventually(lambda: str(folders["named"]).encode() in command_line.read_bytes())
        assert remove_stale_clusters(tmp_path) == [folders["stale"]]
    finally:
        user.kill()
        user.wait()

    assert not folders["stale"].exists()
    assert folders["fresh"].exists() and folders["named"].exists()
