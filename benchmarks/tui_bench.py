"""Terminal UI figures, measured in a real terminal (tmux) against the scripted model server.

Usage: python benchmarks/tui_bench.py [--runs 10]

Figures (medians over the runs; the screen is polled every 10 ms, so each is ±10 ms):

- first frame: from spawning ``cairn`` until its prompt box is on the screen;
- answer shown: from pressing Enter until the (one-chunk) answer is on the screen, including
  the model round trip to the local scripted server;
- quit: from the second Ctrl+C until the process has exited;
- import: ``import cairn.ui.app`` in a fresh interpreter (what the UI adds to start-up).

The scripted server runs in its own process so its CPU is not cairn's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

TMUX = shutil.which("tmux") or "/usr/bin/tmux"
CAIRN = Path(sys.executable).with_name("cairn")
POLL_SECONDS = 0.01
ANSWER = "The benchmark answer is 42."


def start_server(root: Path) -> tuple[subprocess.Popen[str], str]:
    script = root / "script.json"
    script.write_text(json.dumps({"replies": [], "default": {"text": ANSWER}}))
    process = subprocess.Popen(
        [sys.executable, "-m", "cairn.testing.server", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def environment(base_url: str, root: Path) -> dict[str, str]:
    from cairn.testing.fixtures import isolated_env

    env = isolated_env(base_url, root)
    env["TERM"] = "xterm-256color"
    env.pop("TMUX", None)
    return env


def tmux(socket: str, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [TMUX, "-L", socket, *args], env=env, capture_output=True, text=True, check=False
    )
    return result.stdout


def wait_for(condition: Callable[[], bool], limit: float = 30.0) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        if condition():
            return time.perf_counter() - started
        time.sleep(POLL_SECONDS)
    raise TimeoutError("the screen never showed what was expected")


def one_run(base_url: str) -> tuple[float, float, float]:
    root = Path(tempfile.mkdtemp(prefix="cairn-tui-bench-"))
    project = root / "project"
    (project / ".cairn").mkdir(parents=True)
    (project / ".cairn" / "settings.json").write_text(
        json.dumps({"memory": {"enableManagedAutoMemory": False}})
    )
    env = environment(base_url, root)
    socket = f"cairn-bench-{uuid.uuid4().hex[:8]}"
    status = root / "status"
    screen = lambda: tmux(socket, env, "capture-pane", "-p", "-t", "main")  # noqa: E731
    try:
        spawned = time.perf_counter()
        tmux(socket, env, "-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "110",
             "-y", "34", "-c", str(project), "sh", "-c", f'"{CAIRN}"; echo $? > "{status}"')
        wait_for(lambda: "Type a message" in screen())
        first_frame = time.perf_counter() - spawned
        tmux(socket, env, "send-keys", "-t", "main", "-l", "what is the answer?")
        time.sleep(0.2)
        tmux(socket, env, "send-keys", "-t", "main", "Enter")
        answer = wait_for(lambda: ANSWER in screen())
        tmux(socket, env, "send-keys", "-t", "main", "C-c")
        time.sleep(0.1)
        tmux(socket, env, "send-keys", "-t", "main", "C-c")
        quit_time = wait_for(lambda: status.exists() and status.read_text().strip() != "")
        return first_frame, answer, quit_time
    finally:
        tmux(socket, env, "kill-server")
        shutil.rmtree(root, ignore_errors=True)


def import_time() -> float:
    code = (
        "import time; t = time.perf_counter(); import cairn.ui.app; "
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server, base_url = start_server(Path(tmp))
        try:
            one_run(base_url)  # warm the file cache; not counted
            runs = [one_run(base_url) for _ in range(args.runs)]
        finally:
            server.terminate()
            server.wait()
    imports = [import_time() for _ in range(args.runs)]
    rows = [
        ("first frame (spawn → prompt box)", [r[0] for r in runs]),
        ("answer shown (Enter → answer)", [r[1] for r in runs]),
        ("quit (2nd Ctrl+C → exit)", [r[2] for r in runs]),
        ("import cairn.ui.app", imports),
    ]
    print(f"{'figure':<36} {'median ms':>10} {'min ms':>8} {'max ms':>8}   runs={args.runs}")
    for name, values in rows:
        ms = [v * 1000 for v in values]
        print(f"{name:<36} {statistics.median(ms):>10.0f} {min(ms):>8.0f} {max(ms):>8.0f}")
    print(f"cpus={os.cpu_count()} python={sys.version.split()[0]}")


if __name__ == "__main__":
    main()
