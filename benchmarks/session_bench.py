"""What creating a session costs: ``Runtime.new_session`` in process, the part of a daemon's
``POST /session`` that is cairn's own.

Usage: python benchmarks/session_bench.py [--sessions 100] [--files 0] [--runs 2]
       [--instructions] [--baseline ../other/src]

Each run is a process of its own (``--baseline``: that tree's, runs alternating with this
tree's) that makes the daemon bench's project (``--files N`` source files in it), waits until its
files are older than a timestamp's granularity (as in a daemon that has run a while), opens the
runtime and one session, then creates ``--sessions`` more one after another: CPU per session
(median of the runs). ``--instructions``: callgrind's count instead, (10 + N sessions − 10
sessions) / N, one pair of runs per tree (valgrind runs ~50× slower).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETTLE_SECONDS = 2.2  # older than cairn.config.file_stamps.RACY_NS: the files are settled
WARM_SESSIONS = 10  # created in both callgrind runs: what they cost cancels out


def child(sessions: int, files: int) -> None:
    """Runs in the measured process: prints the CPU seconds per session as JSON."""
    sys.path.insert(0, str(Path(__file__).parent))
    from daemon_bench import make_project

    root = Path(tempfile.mkdtemp(prefix="session-bench-"))
    project = make_project(root, memory=False, files=files)
    os.environ.update(
        HOME=str(root / "home"),
        CAIRN_HOME=str(root / "cairn-home"),
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        OPENAI_API_KEY="bench",
        OPENAI_MODEL="scripted-model",
    )
    time.sleep(SETTLE_SECONDS)
    from cairn.session.startup import load_startup

    runtime = load_startup(project).open_runtime()
    runtime.new_session()  # the session runtime's imports
    started = time.process_time()
    for _ in range(sessions):
        runtime.new_session()
    print(json.dumps({"cpu": (time.process_time() - started) / max(1, sessions)}))


def run(src: Path | None, sessions: int, files: int, valgrind: Path | None = None) -> str:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = [sys.executable, __file__, "--child", str(sessions), "--files", str(files)]
    if valgrind is not None:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={valgrind}", *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def instructions(src: Path | None, sessions: int, files: int) -> float:
    """Instructions per session: the difference of two callgrind runs."""
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in (WARM_SESSIONS, WARM_SESSIONS + sessions):
            out = Path(tmp) / f"cg-{count}.out"
            run(src, count, files, valgrind=out)
            match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
            assert match is not None, "no callgrind total"
            totals.append(int(match.group(1)))
    return (totals[1] - totals[0]) / sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--files", type=int, default=0)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--baseline", type=Path, help="src folder of another checkout")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.files)
        return
    trees = {"cairn": None, "baseline": args.baseline} if args.baseline else {"cairn": None}
    print(f"Load average at the start: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n| per session created ({args.files} files) | {' | '.join(trees)} |")
    print(f"|---|{'---|' * len(trees)}")
    if args.instructions:
        counts = [instructions(src, args.sessions, args.files) for src in trees.values()]
        print(f"| instructions | {' | '.join(f'{c / 1e6:.2f} M' for c in counts)} |")
    else:
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, src in trees.items():
                cpu[name].append(json.loads(run(src, args.sessions, args.files))["cpu"])
        cells = [
            f"{statistics.median(cpu[n]) * 1000:.2f} ms "
            f"({', '.join(f'{c * 1000:.2f}' for c in cpu[n])})"
            for n in trees
        ]
        print(f"| CPU, median of {args.runs} ({args.sessions} in a row) | {' | '.join(cells)} |")
    print(f"\nLoad average at the end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
