"""Helpers for end-to-end tests that run the real ``cairn`` command."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..polling import eventually

CAIRN = [sys.executable, "-m", "cairn.cli.main"]
# How long `cairn --acp` may take to exit once the editor closes its stdin. The ACP SDK's own
# default (2 s) is too short on a loaded machine, and its escalation then fails with
# ProcessLookupError when the agent exits between the timeout and the terminate.
ACP_SHUTDOWN = {"shutdown_timeout": 30.0}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project with managed memory off (tests that need memory turn it back on)."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    write_settings(root, {"memory": {"enableManagedAutoMemory": False}})
    return root


def write_settings(project: Path, settings: dict[str, Any]) -> None:
    path = project / ".cairn" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))


def trust_in_user_settings(project: Path, cairn_home: Path | None = None) -> None:
    """Trust ``project``'s folder (its hooks and MCP servers may run) for the ``cairn`` processes
    of ``run_cairn`` (or those with ``cairn_home``): ``security.trustedFolders`` in the user
    settings of their cairn home."""
    cairn_home = cairn_home or project.parent / "cairn-home"  # cairn_env's, next to the project
    assert cairn_home.is_dir(), cairn_home
    path = cairn_home / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    folders = settings.setdefault("security", {}).setdefault("trustedFolders", [])
    folders.append(str(project))
    path.write_text(json.dumps(settings, indent=2))


RunCairn = Callable[..., subprocess.CompletedProcess[str]]


def extract_workers(project: Path) -> list[int]:
    """The live extract workers (``cairn -p`` hands them its turn's Extract) working in
    ``project``: found by their command line and working folder in ``/proc``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            folder = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"cairn.session.extract_worker" in command and Path(folder) == project.resolve():
            found.append(int(entry.name))
    return found


def wait_for_extract_workers(project: Path) -> None:
    """Wait (with a deadline) until no extract worker works in ``project``: its memory is
    saved, or given up and left pending."""
    assert eventually(lambda: not extract_workers(project)), extract_workers(project)


@pytest.fixture
def run_cairn(cairn_env: dict[str, str], project: Path) -> Iterator[RunCairn]:
    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CAIRN, *args],
            cwd=project,
            env=env or cairn_env,
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    yield run
    for pid in extract_workers(project):  # a test that did not wait: no process outlives it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run_probed(
    probe: str, project: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """``python -c probe *args`` in ``project``: a real cairn run inside a probe that reports what
    the process imported or defined (on stderr, at exit); it must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", probe, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done
