"""How the ``cairn`` program ends (``cairn.cli.main.run``): without the interpreter's teardown
when nothing can be lost, and with everything the teardown would have done that a user can see:
``atexit`` callbacks, buffered output, threads still running, a failed flush's report.

Each test is a real process: ``python -m cairn.cli.main`` (as the tests and the installed
``cairn`` start it) or a probe calling ``run()`` the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn._version import __version__
from cairn.testing import ScriptedServer, reply

from .conftest import run_probed

pytestmark = pytest.mark.slow


def _buffered_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` with stdout block-buffered (a pipe's default), as a script's ``cairn`` has it."""
    return {k: v for k, v in (env or os.environ).items() if k != "PYTHONUNBUFFERED"}


def _probe(before: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        f"import sys\n{before}\nsys.argv = ['cairn', *sys.argv[1:]]\n"
        "from cairn.cli.main import run\nrun()\n",
        *args,
    ]


def test_atexit_callbacks_run_and_their_buffered_output_is_written(tmp_path: Path) -> None:
    atexit_write = "import atexit\natexit.register(lambda: print('at exit'))"

    done = subprocess.run(
        _probe(atexit_write, "--version"),
        cwd=tmp_path,
        env=_buffered_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert (done.returncode, done.stdout, done.stderr) == (0, f"{__version__}\nat exit\n", "")


def test_a_thread_still_running_is_waited_for_as_the_interpreter_would(tmp_path: Path) -> None:
    marker = tmp_path / "thread-done"
    thread = (
        "import threading, time\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        f"    open({str(marker)!r}, 'w').write('done')\n"
        "threading.Thread(target=late).start()"
    )

    done = subprocess.run(
        _probe(thread, "--version"), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "done"  # the process ended only after the thread did


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_reported_as_before(tmp_path: Path) -> None:
    """A full device: the flush fails, and the interpreter's exit reports it (code 120)."""
    with Path("/dev/full").open("w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "--version"],
            cwd=tmp_path,
            env=_buffered_env(),
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )

    assert done.returncode == 120
    assert "No space left on device" in done.stderr


# Prints, at exit, the collector's thresholds and how many objects the start-up froze.
GC_PROBE = (
    "import atexit, gc, json, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    "'GC ' + json.dumps([gc.get_threshold(), gc.get_freeze_count()]) + '\\n'))\n"
    "sys.argv = ['cairn', '-p', sys.argv[1]]\n"
    "from cairn.cli.main import run\n"
    "run()\n"
)


def test_a_run_collects_as_usual_once_started_with_the_start_up_frozen(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    """``cairn -p``: the collector's start-up pause (cairn._startup) ends when the runtime is
    open: the default thresholds are back, and what the start-up made is frozen."""
    import gc

    scripted_server.enqueue(reply("plain"))

    done = run_probed(GC_PROBE, project, _buffered_env(cairn_env), "hi")

    assert done.stdout == "plain\n"
    line = next(x for x in done.stderr.splitlines() if x.startswith("GC "))
    thresholds, frozen = json.loads(line.removeprefix("GC "))
    assert tuple(thresholds) == gc.get_threshold()
    assert frozen > 10_000


def test_a_failing_run_keeps_its_exit_code(
    cairn_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """No model endpoint: ``cairn -p`` exits NO_AUTH (41) with its message, through ``run``."""
    env = {k: v for k, v in cairn_env.items() if not k.startswith("OPENAI_")}
    env["CAIRN_HOME"] = str(tmp_path / "empty-home")

    done = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "-p", "hi"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 41, done.stderr
    assert done.stderr.strip()
