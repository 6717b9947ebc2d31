"""How often what a server started outlives a SIGKILLed cairn (issue 25), per subreaper tree.

Usage: python benchmarks/reaper_orphans.py [--runs 50] [--threads 8] [--baseline OLD/src]

Each run starts a stand-in for cairn: a Python process with ``--threads`` idle threads (cairn -p
has five while it waits for the model) whose main thread starts ``reaper.py server`` over a
command (the server) that leaves a ``setsid`` child and a double-forked daemon. The stand-in is
SIGKILLed once all three run; a run counts as *orphaned* when any of them is still alive 5 s
later (then the script kills them). The kernel sends the parent-death signal again each time
the reaper passes to another of the dying process's threads; a reaper that acts on a later
SIGHUP again ends itself before its children. With ``--baseline``, the trees alternate in
rounds of 10.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUND = 10  # runs of one tree before the other's
SURVIVAL_SECONDS = 5.0  # how long a killed tree may take to go before a process counts
TREE = 3  # the server, its setsid child and its daemon
STAND_IN = r"""
import os, subprocess, sys, threading, time
reaper, pids, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(threads):
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
child = f"setsid sh -c 'echo $$ >> {pids}; exec sleep 3600'"
daemon = f"(setsid sh -c 'echo $$ >> {pids}; exec sleep 3601' &)"
command = ["sh", "-c", f"echo $$ >> {pids}; {child} & {daemon}; exec sleep 3600"]
subprocess.Popen(
    [sys.executable, "-I", "-S", reaper, "server", str(os.getpid()), "--", *command],
    start_new_session=True,
)
time.sleep(3600)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _tree(pids: Path) -> list[int]:
    while len(found := pids.read_text().split() if pids.exists() else []) < TREE:
        time.sleep(0.005)
    return [int(pid) for pid in found]


def _one_run(reaper: Path, threads: int, folder: Path, run: int) -> bool:
    """Whether the server or a child of it outlived the killed stand-in."""
    pids = folder / f"children-{run}"
    stand_in = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, str(reaper), str(pids), str(threads)]
    )
    tree = _tree(pids)
    stand_in.kill()
    stand_in.wait()
    deadline = time.monotonic() + SURVIVAL_SECONDS
    while any(_alive(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = [pid for pid in tree if _alive(pid)]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return bool(left)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs of each tree")
    parser.add_argument("--threads", type=int, default=8, help="idle threads of the stand-in")
    parser.add_argument("--baseline", type=Path, help="an older tree's src/ to compare with")
    args = parser.parse_args()
    trees = {"now": Path(__file__).resolve().parent.parent / "src"}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    orphaned = dict.fromkeys(trees, 0)
    done = dict.fromkeys(trees, 0)
    with tempfile.TemporaryDirectory() as folder:
        while min(done.values()) < args.runs:
            for name, src in trees.items():
                for _ in range(min(ROUND, args.runs - done[name])):
                    reaper = src / "cairn" / "hooks" / "reaper.py"
                    orphaned[name] += _one_run(
                        reaper, args.threads, Path(folder), sum(done.values())
                    )
                    done[name] += 1
    for name in trees:
        left = f"{orphaned[name]} of {done[name]} runs left the server or its children alive"
        print(f"{name}: {left} ({args.threads} threads)")


if __name__ == "__main__":
    main()
