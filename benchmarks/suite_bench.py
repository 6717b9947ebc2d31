"""The test suite's own speed (issue 25): the README's test command and the quick loop.

    .venv/bin/python benchmarks/suite_bench.py [--runs N] [--quick | --full] [--stress N]

Runs ``pytest -q`` (the last step of the README's test command, as CI runs it) and the quick
loop ``pytest -q -m "not slow"`` in this checkout, each ``--runs`` times, and prints per run the
wall time, the CPU time (user + system of pytest and of every process it waited for: the
workers, the cairn processes and servers the tests start) and the load average when it began.
``--stress N`` runs N busy-looping processes alongside, as a loaded machine; the table says
whether each run passed. On a machine shared with other work the wall time depends on it: CPU
seconds over the number of cores is what the run would take on an idle machine at best.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [str(Path(sys.executable).parent / "pytest"), "-q"]  # as the README runs it
COMMANDS = {"full": [], "quick": ["-m", "not slow"]}


@dataclass
class Run:
    name: str
    load: float
    wall: float
    cpu: float
    passed: bool
    summary: str


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(name: str, log: Path | None) -> Run:
    load = os.getloadavg()[0]
    cpu, start = _children_cpu(), time.monotonic()
    done = subprocess.run([*PYTEST, *COMMANDS[name]], cwd=ROOT, capture_output=True, text=True)
    wall, cpu = time.monotonic() - start, _children_cpu() - cpu
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    lines = done.stdout.strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    summary = "; ".join([lines[-1] if lines else done.stderr.strip(), *failed])
    return Run(name, load, wall, cpu, done.returncode == 0, summary)


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="only the quick loop")
    which.add_argument("--full", action="store_true", help="only the README's test command")
    parser.add_argument("--stress", type=int, default=0, help="busy processes alongside")
    parser.add_argument("--log", type=Path, help="a folder for each run's pytest output")
    options = parser.parse_args()
    names = ["quick"] if options.quick else ["full"] if options.full else ["full", "quick"]
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(options.stress)]
    for spinner in spinners:
        spinner.start()
    if options.log:
        options.log.mkdir(parents=True, exist_ok=True)
    print(f"cores {os.cpu_count()}, stress {options.stress}, {time.strftime('%Y-%m-%d %H:%M')}")
    print("| run | load at start | wall s | CPU s | CPU s / cores | result |")
    print("|---|---|---|---|---|---|")
    try:
        for number in range(1, options.runs + 1):
            for name in names:
                log = options.log / f"{name}-{number}.txt" if options.log else None
                r = run(name, log)
                cores = os.cpu_count() or 1
                print(
                    f"| {r.name} | {r.load:.1f} | {r.wall:.0f} | {r.cpu:.0f} | {r.cpu / cores:.0f} "
                    f"| {'passed' if r.passed else 'FAILED'}: {r.summary} |",
                    flush=True,
                )
    finally:
        for spinner in spinners:
            spinner.terminate()


if __name__ == "__main__":
    main()
