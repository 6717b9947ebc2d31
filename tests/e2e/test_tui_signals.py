"""Issue #30: a terminal UI killed with its terminal (SIGHUP) or by SIGTERM shuts down as
`/quit` does: the session closes (its SessionEnd hooks run) and the checkpoint preparation it
started in the background is stopped. Before, the process died at once and left that git
running (22 s in a 10,000-file project, holding the checkpoint lock).

The TUI runs in a pseudo-terminal; `git` is a wrapper on PATH that stalls on `git add` (the
preparation's slow part) so the preparation is surely running when the signal comes.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from ..polling import eventually
from .conftest import CAIRN, trust_in_user_settings

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("git") is None, reason="checkpoints need git"),
]

GIT_WRAPPER = """#!/usr/bin/env bash
if [ "$1" = "-c" ] && printf '%s\\n' "$@" | grep -qx add; then
  echo $$ > "{pids}/git-add.pid.tmp"  # renamed whole, so a reader never sees it empty
  mv "{pids}/git-add.pid.tmp" "{pids}/git-add.pid"
  exec sleep 120
fi
exec {git} "$@"
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent has ended
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_signalled_tui_shuts_down_like_quit(
    signum: signal.Signals,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(GIT_WRAPPER.format(pids=pids, git=shutil.which("git")))
    wrapper.chmod(0o755)
    ended = tmp_path / "session-end.json"
    # Written whole (tmp + rename): the file must not exist while cat is still writing it.
    hook = {"type": "command", "command": f"cat > {ended}.tmp && mv {ended}.tmp {ended}"}
    (project / ".cairn" / "settings.json").write_text(
        json.dumps(
            {
                "memory": {"enableManagedAutoMemory": False},
                "hooks": {"SessionEnd": [{"hooks": [hook]}]},
            }
        )
    )
    trust_in_user_settings(project)
    (project / "a.txt").write_text("a\n")
    # The model starts answering (which starts the preparation), then takes its time.
    scripted_server.enqueue(reply(chunks=["Thinking", *"." * 300], chunk_delay=0.2), purpose="main")
    env = {**cairn_env, "PATH": f"{wrapper.parent}:{cairn_env['PATH']}", "TERM": "xterm-256color"}

    master, slave = pty.openpty()
    process = subprocess.Popen(
        [*CAIRN, "--approval-mode", "default", "change a.txt"],
        cwd=project,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    drained = threading.Thread(target=_drain, args=(master,), daemon=True)
    drained.start()
    try:
        assert eventually(lambda: (pids / "git-add.pid").exists()), "the preparation did not start"
        git = int((pids / "git-add.pid").read_text())
        assert _alive(git)

        if signum == signal.SIGHUP:  # the terminal went away: writing to it fails now
            os.close(master)
            master = -1
        process.send_signal(signum)

        assert process.wait(timeout=60) is not None
        assert eventually(lambda: ended.exists()), "SessionEnd hooks did not run"
        assert json.loads(ended.read_text())["reason"] == "other"
        assert eventually(lambda: not _alive(git)), "the checkpoint git outlived cairn"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if master >= 0:
            os.close(master)


def _drain(fd: int) -> None:
    """Read what the TUI draws, so it never blocks on a full terminal."""
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return
