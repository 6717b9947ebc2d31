"""Some test files' own cost, this tree against a baseline tree, interleaved (issue 25).

    .venv/bin/python benchmarks/suite_files_bench.py --baseline /tmp/base-d455 [--runs N] FILE...

Runs ``pytest -q -n 0 -p no:randomly FILE`` in this checkout and in ``--baseline`` (a worktree
of another commit; its ``src`` goes first on ``PYTHONPATH``, so the same virtualenv runs each
tree's own code and tests), each file ``--runs`` times, one tree after the other, and prints per
file and tree the median wall time and the median CPU time (user + system of pytest and of every
process it waited for: the cairn processes and servers the tests start). One process and no
xdist: a test's cost is not hidden behind the other workers. A FILE may be a node id (with
``::``); one missing from a tree is run as far as it exists there (``--deselect`` is not used).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [str(Path(sys.executable).parent / "pytest"), "-q", "-n", "0", "-p", "no:randomly"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(tree: Path, target: str) -> tuple[float, float, str]:
    """Wall and CPU seconds of one pytest run of ``target`` in ``tree``, and its last line."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    cpu, start = _children_cpu(), time.monotonic()
    done = subprocess.run(
        [*PYTEST, target], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    wall, cpu = time.monotonic() - start, _children_cpu() - cpu
    lines = done.stdout.strip().splitlines()
    return wall, cpu, lines[-1] if lines else done.stderr.strip()[-200:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", metavar="FILE")
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    trees = {"baseline": args.baseline.resolve(), "this tree": ROOT}
    print(f"load {os.getloadavg()[0]:.1f}, {args.runs} runs each, medians", flush=True)
    for target in args.targets:
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        last: dict[str, str] = {}
        for _ in range(args.runs):
            for name, tree in trees.items():
                wall, cpu, last[name] = run(tree, target)
                figures[name].append((wall, cpu))
        for name in trees:
            walls = [wall for wall, _ in figures[name]]
            cpus = [cpu for _, cpu in figures[name]]
            print(
                f"{target} | {name} | wall {statistics.median(walls):.1f} s "
                f"| CPU {statistics.median(cpus):.1f} s | {last[name]}",
                flush=True,
            )
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
