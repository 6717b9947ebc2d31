"""The throw-away PostgreSQL server of ``cairn.testing.postgres``, as real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.testing.postgres import PostgresServer, find_postgres_bin

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
