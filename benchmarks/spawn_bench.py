"""What one spawned ``cairn`` costs, per command: CPU from spawn to exit, modules imported, and
(optionally) the instructions executed.

Usage: python benchmarks/spawn_bench.py [--runs 7] [--baseline ../other/src]
       [--only 'version;help;-p, memory off;...'] [--instructions]

The test suite starts hundreds of ``cairn`` processes and a user pays the same start-up, so each
command line here is a real process (``python -m cairn.cli.main ...``, as the tests start it)
against the scripted model server in its own process (its CPU is not counted):

- ``version``: ``cairn --version``; ``help``: ``cairn --help``;
- ``-p, memory off`` / ``-p, memory on``: ``cairn -p hi -y`` with one scripted answer, in a project
  with managed memory off, and on (no memories yet; the extract worker it may leave is not
  counted);
- ``memory list`` (a project with no memories), ``memory path``, ``trust --list``, ``mcp list``
  (no servers configured);
- ``serve``: ``cairn serve --port 0`` until it says it is listening, then SIGTERM, to its exit.

Each command runs ``--runs`` times, this tree and ``--baseline`` (another checkout's ``src``, given
by ``PYTHONPATH``) alternating, so load on the machine affects both alike; the figure is the
median CPU (user + system, ``wait4``) in ms. "modules" is ``len(sys.modules)`` when the process
exits (a probe run once per tree). ``--instructions`` counts with valgrind's callgrind the
instructions of one run of each (spawn to exit): a figure that the machine's load does not move.
Bytecode caches are written and used (``PYTHONDONTWRITEBYTECODE`` removed), as for an installed
cairn.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core_bench import make_env, start_server

CAIRN = [sys.executable, "-m", "cairn.cli.main"]
COMMANDS: dict[str, list[str]] = {
    "version": ["--version"],
    "help": ["--help"],
    "-p, memory off": ["-p", "hi", "-y"],
    "-p, memory on": ["-p", "hi", "-y"],
    "memory list": ["memory", "list"],
    "memory path": ["memory", "path"],
    "trust --list": ["trust", "--list"],
    "mcp list": ["mcp", "list"],
    "serve": ["serve", "--port", "0"],
}
# Prints len(sys.modules) last thing at exit (atexit runs in reverse order of registration).
MODULES_PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write(f'\\nMODULES {len(sys.modules)}\\n'))\n"
    "sys.argv = ['cairn', *sys.argv[1:]]\n"
    "from cairn.cli.main import main\n"
    "main()\n"
)


def _cpu_ms(before: resource.struct_rusage) -> float:
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def run_once(name: str, env: dict[str, str], cwd: Path, prefix: list[str]) -> tuple[float, str]:
    """(CPU ms of the process, its stderr)."""
    argv = [*prefix, *COMMANDS[name]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if name != "serve":
        done = subprocess.run(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr}")
        return _cpu_ms(before), done.stderr
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    deadline = time.monotonic() + 60
    while "listening on " not in process.stdout.readline():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise SystemExit(f"serve did not start: {process.stderr.read()}")
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    return _cpu_ms(before), err


def prepare(workdir: Path, base_url: str) -> dict[str, tuple[Path, dict[str, str]]]:
    off = workdir / "memory-off"
    (off / ".git").mkdir(parents=True)
    (off / ".cairn").mkdir()
    (off / ".cairn" / "settings.json").write_text(
        json.dumps({"memory": {"enableManagedAutoMemory": False}})
    )
    on = workdir / "memory-on"
    (on / ".git").mkdir(parents=True)
    env = make_env(base_url, workdir / "home")
    return {
        name: (on if name in ("-p, memory on", "memory list", "memory path") else off, env)
        for name in COMMANDS
    }


def instructions(name: str, env: dict[str, str], cwd: Path, folder: Path) -> int:
    """Instructions one run of ``name`` executes, spawn to exit (callgrind)."""
    out = folder / f"cg.{abs(hash((name, env.get('PYTHONPATH'))))}"
    prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *CAIRN]
    run_once(name, env, cwd, prefix)
    text = out.read_text()
    out.unlink()
    return int(next(x for x in text.splitlines() if x.startswith("summary:")).split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another checkout's src folder")
    parser.add_argument("--only", help="command names separated by ';' (default: all)")
    parser.add_argument("--instructions", action="store_true", help="also count (valgrind)")
    args = parser.parse_args()
    names = args.only.split(";") if args.only else list(COMMANDS)
    with tempfile.TemporaryDirectory(prefix="spawn-bench-") as tmp:
        workdir = Path(tmp)
        server, base_url = start_server([], workdir / "requests.jsonl")
        try:
            cases = prepare(workdir, base_url)
            trees = (
                {"this tree": None, "baseline": args.baseline}
                if args.baseline
                else {"this tree": None}
            )

            def env_of(name: str, tree: Path | None) -> dict[str, str]:
                env = cases[name][1]
                return {**env, "PYTHONPATH": str(tree)} if tree else env

            for name in names:  # warm the bytecode caches
                for tree in trees.values():
                    run_once(name, env_of(name, tree), cases[name][0], CAIRN)
            cpu: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.runs):
                for name in names:
                    for label, tree in trees.items():
                        ms, _ = run_once(name, env_of(name, tree), cases[name][0], CAIRN)
                        cpu.setdefault((name, label), []).append(ms)
            modules = {}
            probe = [sys.executable, "-c", MODULES_PROBE]
            for name in names:
                for label, tree in trees.items():
                    _, err = run_once(name, env_of(name, tree), cases[name][0], probe)
                    line = next(x for x in err.splitlines() if x.startswith("MODULES "))
                    modules[(name, label)] = int(line.split()[1])
            counts = {}
            if args.instructions:
                for name in names:
                    for label, tree in trees.items():
                        counts[(name, label)] = instructions(
                            name, env_of(name, tree), cases[name][0], workdir
                        )
        finally:
            server.terminate()
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.runs} runs, CPU ms")
    header = "| command | " + " | ".join(
        f"{label} CPU | {label} modules" + (f" | {label} instructions" if counts else "")
        for label in trees
    )
    print(header + (" | CPU ratio |" if args.baseline else " |"))
    for name in names:
        cells = []
        for label in trees:
            cells.append(f"{statistics.median(cpu[(name, label)]):.0f}")
            cells.append(str(modules[(name, label)]))
            if counts:
                cells.append(f"{counts[(name, label)] / 1e6:.1f} M")
        ratio = ""
        if args.baseline:
            mine = statistics.median(cpu[(name, "this tree")])
            ratio = f" | {mine / statistics.median(cpu[(name, 'baseline')]):.2f}"
        print(f"| {name} | " + " | ".join(cells) + ratio + " |")


if __name__ == "__main__":
    main()
