"""docs/daemon.md's HAProxy configuration for several replicas is the one the replica tests run
behind (``cairn.testing.haproxy``, tests/e2e/test_daemon_replicas.py), and HAProxy accepts it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cairn.testing.haproxy import find_haproxy, haproxy_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "daemon.md"
_BLOCK = re.compile(r"<!-- docs-test: haproxy -->\n```haproxy\n(.*?)```", re.DOTALL)


def documented() -> str:
    [block] = _BLOCK.findall(DOC.read_text(encoding="utf-8"))
    return str(block)


def test_the_documented_configuration_is_the_one_the_tests_run() -> None:
    text = documented()
    bind = re.search(r"^    bind (\S+)$", text, re.MULTILINE)
    servers = re.findall(r"^    server \S+ (\S+)$", text, re.MULTILINE)

    assert bind is not None and len(servers) == 3
    assert text == haproxy_config(bind.group(1), servers)


@pytest.mark.skipif(find_haproxy() is None, reason="HAProxy is not installed")
def test_haproxy_accepts_the_documented_configuration(tmp_path: Path) -> None:
    config = tmp_path / "cairn.cfg"
    config.write_text(documented())
    program = find_haproxy()
    assert program is not None

    checked = subprocess.run(
        [str(program), "-c", "-f", str(config)],
        env={"CAIRN_SERVER_TOKEN": "t", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert checked.returncode == 0, checked.stdout + checked.stderr
