"""The subreaper (cairn.hooks.reaper) run for real, with this test process as its cairn: what the
command starts, ``setsid`` and double-forked processes included, ends when cairn goes away."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.hooks.process import reaped

from ..polling import DEADLINE_SECONDS, eventually
from ..process_helpers import wait_until_dead

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")

HANG_UP_GAP_SECONDS = 0.0002  # between the SIGHUPs of a burst: a thread's exit apart, or less


def _leaving_children(pids: Path) -> list[str]:
    """A command that starts a `setsid` child and a daemon that double-forks away, writes their
    PIDs to ``pids`` and stays."""
    child = f"setsid sh -c 'echo $$ >> {pids}; exec sleep 3600'"
    return ["sh", "-c", f"{child} & (setsid sh -c 'echo $$ >> {pids}; exec sleep 3601' &); wait"]


def _children(pids: Path) -> list[int]:
    def found() -> list[str]:
        return pids.read_text().split() if pids.exists() else []

    assert eventually(lambda: len(found()) >= 2), f"the command's children never started: {pids}"
    return [int(pid) for pid in found()]


def _hang_up_until_gone(reaper: subprocess.Popen[bytes]) -> bool:
    """SIGHUP after SIGHUP until the reaper exits, as a killed multi-threaded cairn sends them;
    whether it exited within the suite's deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while reaper.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(reaper.pid, signal.SIGHUP)
        time.sleep(HANG_UP_GAP_SECONDS)
    return reaper.poll() is not None


@pytest.mark.parametrize("mode", ["server", "hook", "shell"])
def test_a_repeated_parent_death_signal_still_kills_everything(mode: str, tmp_path: Path) -> None:
    """Regression (issue 25): a killed cairn's MCP server children outlived it. The kernel sends
    the parent-death signal again each time the reaper passes to another of cairn's threads as
    they exit one by one (1 to 5 SIGHUPs, up to 26 ms apart, measured with six threads), and the
    second one, arriving while the reaper was killing, ended the reaper before its children."""
    pids = tmp_path / "children.pids"
    reaper = subprocess.Popen(
        reaped(_leaving_children(pids), mode),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    children: list[int] = []
    try:
        children = _children(pids)

        assert _hang_up_until_gone(reaper), "the reaper outlived its hang-ups"

        assert [pid for pid in children if not wait_until_dead(pid)] == []
    finally:
        reaper.kill()
        reaper.wait()
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
