"""``cairn -p`` from spawn to exit with memory on: the whole command, and the memory it saves.

Usage: python benchmarks/headless_exit_bench.py [--runs 9] [--baseline ../other/src]

Issue 32: ``cairn -p`` waited for its turn's Extract after the answer was out. Each run spawns
``cairn -p`` with managed memory on (a project with no memories; each run a new session, so
each has something to extract) against the scripted model server in its own process (instant
answers; the extraction agent answers without writing), and reports per tree, interleaved with
``--baseline``'s runs (another checkout's ``src``, given by ``PYTHONPATH``):

- spawn → first model request (the server's clock);
- spawn → exit: what the user's command (or script) waits for;
- CPU of the ``cairn -p`` process (``wait4``);
- CPU of the extract worker it leaves (this process becomes a subreaper, so the detached worker
  is its child once ``cairn -p`` exits, and is waited for), and spawn → the worker's exit (the
  memory saved). A tree that extracts in-process has no worker: its extraction is in the
  first two figures.

Medians of ``--runs``; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core_bench import make_env, received, start_server
from process_tree import become_subreaper, reap_orphans

PROMPT = "how do we deploy service 17 to the staging cluster?"
WORKER_DEADLINE_S = 120.0


def one_run(env: dict[str, str], project: Path, record: Path) -> dict[str, float]:
    seen = len(received(record))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "-p", PROMPT],
        cwd=project, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _, status, usage = os.wait4(process.pid, 0)
    exited = time.time()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"cairn -p failed with {process.returncode}")
    left = reap_orphans(WORKER_DEADLINE_S, keep=frozenset(_server_pids))
    saved = time.time()
    if left:
        raise SystemExit("an extract worker did not finish")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_cpu = usage.ru_utime + usage.ru_stime
    all_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    requests = received(record)[seen:]
    first = min(r["received_at"] for r in requests if r.get("purpose") == "main")
    return {
        "first request (ms)": (first - started) * 1000,
        "spawn → exit (ms)": (exited - started) * 1000,
        "CPU of cairn -p (ms)": own_cpu * 1000,
        "CPU of the extract worker (ms)": (all_cpu - own_cpu) * 1000,
        "spawn → memory saved (ms)": (saved - started) * 1000,
    }


_server_pids: set[int] = set()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", type=Path, help="the src folder of another checkout")
    args = parser.parse_args()
    if not become_subreaper():
        raise SystemExit("this benchmark needs Linux (PR_SET_CHILD_SUBREAPER)")
    with tempfile.TemporaryDirectory(prefix="cairn-exit-bench-") as tmp:
        work = Path(tmp)
        record = work / "requests.jsonl"
        server, base_url = start_server([], record)
        _server_pids.add(server.pid)
        try:
            trees: dict[str, str | None] = {"this tree": None}
            if args.baseline is not None:
                trees["baseline"] = str(args.baseline.resolve())
            cases: dict[str, tuple[dict[str, str], Path]] = {}
            for name, src in trees.items():
                home = work / f"home-{len(cases)}"
                project = work / f"project-{len(cases)}"
                (project / ".git").mkdir(parents=True)
                home.mkdir()
                env = make_env(base_url, home)
                if src is not None:
                    env["PYTHONPATH"] = src
                cases[name] = (env, project)
            for env, project in cases.values():
                one_run(env, project, record)  # warm-up: bytecode, the memory index
            results: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
            for _ in range(args.runs):
                for name, (env, project) in cases.items():
                    results[name].append(one_run(env, project, record))
        finally:
            server.terminate()
            server.wait()
    load = os.getloadavg()
    print(f"\n{args.runs} runs per tree, medians; load average {load[0]:.2f} / {load[1]:.2f}\n")
    names = list(results)
    print("| `cairn -p`, memory on, instant model | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for figure in results[names[0]][0]:
        cells = [f"{statistics.median(r[figure] for r in results[n]):.0f}" for n in names]
        print(f"| {figure} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
