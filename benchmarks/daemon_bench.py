"""`cairn serve` figures: boot time, idle memory, and 50 concurrent sessions under load.

Usage: python benchmarks/daemon_bench.py [--boots 10] [--sessions 50] [--prompts 5] [--memory]
       [--files 0] [--rounds 1] [--baseline ../other/src]

Everything runs with the daemon's default flags against an instantly answering scripted model
in its own process (``python -m cairn.testing.server``), in an isolated CAIRN_HOME. By default
the project's settings turn managed memory off, so the load figures measure the daemon rather
than background Extract traffic; ``--memory`` leaves it on. ``--files N`` puts N source files in
the project, so building its checkpoints' shadow index takes as long as in a real one.

- boot: wall time from spawning ``cairn serve`` to ``GET /health`` answering 200 (median);
- first capabilities: how long a ``GET /capabilities`` sent as soon as ``/health`` answers takes
  (median);
- first session: wall time from spawning to the first ``POST /session`` answered: the daemon
  listens before it loads the session runtime, and that request waits for it (median);
- session creation: the CPU of the daemon's event-loop thread per ``POST /session``, with
  ``--sessions`` sessions created one after another in a daemon of its own (median);
- idle RSS: the resident memory of the daemon and every process it started, 1 s after that
  first session was created (median);
- load: ``--sessions`` SDK clients at once, each creating a session, opening its event stream and
  sending ``--prompts`` prompts one after another; latency is from sending the prompt to
  receiving its ``turn_complete``. Memory and CPU are the whole process tree's
  (``process_tree.py``): peak RSS is the largest summed RSS of the daemon and its children seen
  every 10 ms, CPU per turn the tree's CPU over the load (children waited for included) divided
  by the turns, and "checkpoint processes" the most checkpoint preparers and git processes
  alive at once.

``--instructions`` (valgrind) also counts the instructions the daemon executes per turn: a
daemon under callgrind, warmed up with 2 sessions × 2 prompts, instrumented only while
``--instruction-sessions`` (1) sessions × ``--instruction-prompts`` (20) prompts run; creating
those sessions is counted too. Unlike CPU time on a shared machine this count does not move with
the load, with one session at a time (with several, a loaded server's work depends on timing:
how many events a loop pass handles, how many frames one write carries).

``--rounds N`` repeats the load N times (medians reported). ``--baseline`` (the ``src`` folder of
another checkout) runs that code too, boots and load rounds alternating with this tree's, so
before/after figures come from one run under the same machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from process_tree import TreeSampler, tree_cpu_seconds, tree_rss_kib

from cairn.sdk import DaemonClient, DaemonSessionClient

CAIRN = [sys.executable, "-m", "cairn.cli.main", "serve"]
HEALTH_POLL_SECONDS = 0.002  # how often boot() asks /health while the daemon starts
IDLE_SETTLE_SECONDS = 1.0  # wait before reading idle RSS
CHECKPOINT_PROCESSES = r"cairn\.recording\.checkpoints|^\S*git "  # preparers and their git


def start_model_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "cairn.testing.server", "--port", "0", "--default-text", "Done."],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def environment(base_url: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "OPENAI_"))}
    env.update(
        HOME=str(home / "home"),
        CAIRN_HOME=str(home / "cairn-home"),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="bench",
        OPENAI_MODEL="scripted-model",
        NO_PROXY="127.0.0.1,localhost",
    )
    # As an installed cairn runs: bytecode written once and reused (this machine sets
    # PYTHONDONTWRITEBYTECODE, which would recompile every changed module on every start).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def make_project(root: Path, memory: bool, files: int = 0) -> Path:
    project = root / "project"
    (project / ".git").mkdir(parents=True)
    (project / "README.md").write_text("# Bench project\n")
    for index in range(files):  # a workspace whose shadow index takes a while to build
        module = project / "src" / f"pkg{index % 20}" / f"module{index}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(f"def f{index}():\n    return {index}\n" * 40)
    settings = project / ".cairn" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"memory": {"enableManagedAutoMemory": memory}}))
    return project


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def health_ok(port: int) -> bool:
    try:
        return get_ok(port, "/health", timeout=0.5)
    except OSError:
        return False


def get_ok(port: int, path: str, timeout: float = 30) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        return sock.recv(64).startswith(b"HTTP/1.1 200")


def own_peak_kib(pid: int) -> int:
    """The daemon's own peak RSS (VmHWM), without its children."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def spawn(env: dict[str, str], project: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CAIRN, "--port", str(port)],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def create_session(port: int) -> bool:
    body = b"{}"
    request = (
        f"POST /session HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        return sock.recv(64).startswith(b"HTTP/1.1 200")


def boot(env: dict[str, str], project: Path) -> tuple[float, float, int, float]:
    """(seconds from spawn to /health answering, to a first session created, idle RSS in KiB,
    seconds a GET /capabilities sent right after /health answered took).

    The daemon listens before it imports the session runtime; a request that needs sessions
    waits for it, so the second figure is when the daemon is fully ready.
    """
    port = free_port()
    started = time.perf_counter()
    process = spawn(env, project, port)
    try:
        while not health_ok(port):
            if process.poll() is not None:
                raise RuntimeError(f"cairn serve exited with {process.returncode}")
            time.sleep(HEALTH_POLL_SECONDS)
        health = time.perf_counter() - started
        asked = time.perf_counter()
        if not get_ok(port, "/capabilities"):
            raise RuntimeError("GET /capabilities failed")
        capabilities = time.perf_counter() - asked
        if not create_session(port):
            raise RuntimeError("POST /session failed")
        ready = time.perf_counter() - started
        time.sleep(IDLE_SETTLE_SECONDS)
        return health, ready, tree_rss_kib(process.pid), capabilities
    finally:
        stop(process)


def loop_cpu_ns(pid: int) -> int:
    """CPU time of the daemon's main thread (its event loop), in ns (``/proc/<pid>/schedstat``)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def creation_cpu(env: dict[str, str], project: Path, count: int) -> float:
    """Seconds of the event loop's CPU per ``POST /session``: ``count`` created one after
    another, after a first one that loads the session runtime."""
    port = free_port()
    process = spawn(env, project, port)
    try:
        while not health_ok(port):
            time.sleep(HEALTH_POLL_SECONDS)
        if not create_session(port):
            raise RuntimeError("POST /session failed")
        before = loop_cpu_ns(process.pid)
        for _ in range(count):
            if not create_session(port):
                raise RuntimeError("POST /session failed")
        return (loop_cpu_ns(process.pid) - before) / count / 1e9
    finally:
        stop(process)


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    completed: int = 0


async def one_session(
    url: str, prompts: int, result: LoadResult, token: str | None = None
) -> None:
    try:
        async with DaemonClient(url, token, timeout=60) as client:
            session = await DaemonSessionClient.create(client)
            async with contextlib.aclosing(session.events()) as events:
                for n in range(prompts):
                    sent = time.perf_counter()
                    admission = await session.prompt(f"task {n}: summarise README.md")
                    async for event in events:
                        if event.prompt_id == admission.prompt_id and event.type in (
                            "turn_complete",
                            "turn_error",
                        ):
                            break
                    result.latencies.append(time.perf_counter() - sent)
                    if event.type == "turn_complete" and event.data.get("stopReason") == "end_turn":
                        result.completed += 1
                    else:
                        result.errors.append(json.dumps(dict(event.data))[:200])
            await session.close()
    except Exception as exc:  # a benchmark counts failures, it does not stop
        result.errors.append(repr(exc))


async def load(
    url: str, sessions: int, prompts: int, token: str | None = None
) -> tuple[LoadResult, float]:
    result = LoadResult()
    started = time.perf_counter()
    await asyncio.gather(*(one_session(url, prompts, result, token) for _ in range(sessions)))
    return result, time.perf_counter() - started


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run_load(env: dict[str, str], project: Path, sessions: int, prompts: int) -> dict[str, float]:
    """One load on a daemon with a cairn home of its own: a round never finds what an earlier
    one left (a shadow index, recordings)."""
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="cairn-home-", dir=Path(env["CAIRN_HOME"]).parent))
    process = spawn({**env, "CAIRN_HOME": str(home)}, project, port)
    try:
        while not health_ok(port):
            time.sleep(0.01)
        cpu_before = tree_cpu_seconds(process.pid)
        with TreeSampler(process.pid, match=CHECKPOINT_PROCESSES) as sampler:
            result, wall = asyncio.run(load(f"http://127.0.0.1:{port}", sessions, prompts))
        cpu = tree_cpu_seconds(process.pid) - cpu_before
        tree = sampler.stats
        own_peak = own_peak_kib(process.pid)
    finally:
        stop(process)
    for error in result.errors[:5]:
        print("error:", error)
    return {
        "turns": result.completed,
        "errors": len(result.errors),
        "wall": wall,
        "p50": percentile(result.latencies, 0.5) if result.latencies else float("nan"),
        "p95": percentile(result.latencies, 0.95) if result.latencies else float("nan"),
        "peak_rss_mb": tree.peak_rss_kib / 1024,
        "cpu_per_turn_ms": cpu * 1000 / max(1, len(result.latencies)),
        "own_peak_rss_mb": own_peak / 1024,
        "checkpoint_processes": tree.most_matching,
        "checkpoint_seen": len(tree.seen_matching),
        "processes": tree.most_processes,
    }


CALLGRIND_POLL_SECONDS = 0.1  # how often a daemon under valgrind is asked for /health


def instructions_per_turn(
    env: dict[str, str], project: Path, sessions: int, prompts: int, folder: Path
) -> tuple[float, int]:
    """(instructions the daemon executed per turn under a small load, turns), by callgrind."""
    port = free_port()
    out = folder / "callgrind.out"
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    process = subprocess.Popen(
        [*valgrind, *CAIRN, "--port", str(port)],
        cwd=project,
        env={**env, "CAIRN_HOME": str(folder / "cairn-home")},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not health_ok(port):
            if process.poll() is not None:
                raise RuntimeError(f"cairn serve under valgrind exited with {process.returncode}")
            time.sleep(CALLGRIND_POLL_SECONDS)
        url = f"http://127.0.0.1:{port}"
        asyncio.run(load(url, 2, 2))  # imports and first-use work, not counted
        pid = str(process.pid)
        subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
        result, _ = asyncio.run(load(url, sessions, prompts))
        subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)
    finally:
        process.terminate()
        process.wait(300)
    if result.errors:
        raise RuntimeError(f"the counted load failed: {result.errors[0]}")
    total = 0
    for line in out.read_text().splitlines():
        if line.startswith("totals:"):
            total = int(line.split()[1])
    return total / len(result.latencies), len(result.latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1, help="load runs (medians reported)")
    parser.add_argument("--memory", action="store_true", help="leave managed memory on")
    parser.add_argument(
        "--files", type=int, default=0, help="source files in the project (its checkpoints)"
    )
    parser.add_argument("--baseline", type=Path, help="src folder of another checkout")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions per turn (valgrind)"
    )
    parser.add_argument("--instruction-sessions", type=int, default=1)
    parser.add_argument("--instruction-prompts", type=int, default=20)
    args = parser.parse_args()

    model, base_url = start_model_server()
    trees = {"cairn": None, "baseline": args.baseline} if args.baseline else {"cairn": None}
    boots: dict[str, list[tuple[float, float, int, float]]] = {name: [] for name in trees}
    creations: dict[str, list[float]] = {name: [] for name in trees}
    loads: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    counted: dict[str, tuple[float, int]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            env = environment(base_url, root)
            project = make_project(root, args.memory, args.files)
            envs = {
                name: env if src is None else {**env, "PYTHONPATH": str(src)}
                for name, src in trees.items()
            }
            for _ in range(args.boots):
                for name in trees:
                    boots[name].append(boot(envs[name], project))
                    creations[name].append(creation_cpu(envs[name], project, args.sessions))
            for _ in range(args.rounds):
                for name in trees:
                    loads[name].append(run_load(envs[name], project, args.sessions, args.prompts))
            for name in trees if args.instructions else ():
                folder = root / f"callgrind-{name}"
                folder.mkdir()
                counted[name] = instructions_per_turn(
                    envs[name], project, args.instruction_sessions, args.instruction_prompts, folder
                )
    finally:
        model.terminate()
        model.wait()

    total = args.sessions * args.prompts
    print("Load average at the end: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))
    print()
    print(f"| figure | {' | '.join(trees)} | target |")
    print(f"|---|{'---|' * len(trees)}---|")

    def row(label: str, cells: list[str], target: str) -> None:
        print(f"| {label} | {' | '.join(cells)} | {target} |")

    def median_of(name: str, key: str) -> float:
        return statistics.median(run[key] for run in loads[name])

    row(
        f"boot, spawn → /health (median of {args.boots})",
        [
            f"{statistics.median(b[0] for b in boots[n]) * 1000:.0f} ms "
            f"(min {min(b[0] for b in boots[n]) * 1000:.0f}, "
            f"max {max(b[0] for b in boots[n]) * 1000:.0f})"
            for n in trees
        ],
        "≤ 400 ms",
    )
    row(
        "first GET /capabilities, sent when /health answered (median)",
        [f"{statistics.median(b[3] for b in boots[n]) * 1000:.1f} ms" for n in trees],
        "≤ 20 ms",
    )
    row(
        "spawn → first POST /session answered (median)",
        [f"{statistics.median(b[1] for b in boots[n]) * 1000:.0f} ms" for n in trees],
        "–",
    )
    row(
        f"event-loop CPU per POST /session, {args.sessions} in a row (median of {args.boots})",
        [f"{statistics.median(creations[n]) * 1000:.2f} ms" for n in trees],
        "–",
    )
    row(
        "idle RSS after one session, daemon and children (median)",
        [f"{statistics.median(b[2] / 1024 for b in boots[n]):.0f} MB" for n in trees],
        "≤ 100 MB",
    )
    rounds = f" (median of {args.rounds})" if args.rounds > 1 else ""
    row(
        f"{args.sessions} sessions × {args.prompts} prompts: completed, errors (worst round)",
        [
            f"{min(r['turns'] for r in loads[n]):.0f} / {total}, "
            f"{max(r['errors'] for r in loads[n]):.0f} errors"
            for n in trees
        ],
        "all, 0 errors",
    )
    row(f"wall{rounds}", [f"{median_of(n, 'wall'):.2f} s" for n in trees], "≤ 7 s")
    row(
        f"prompt → turn_complete p50 / p95{rounds}",
        [f"{median_of(n, 'p50') * 1000:.0f} / {median_of(n, 'p95') * 1000:.0f} ms" for n in trees],
        "p95 ≤ 400 ms",
    )
    row(
        f"CPU per turn under that load, daemon and children{rounds}",
        [f"{median_of(n, 'cpu_per_turn_ms'):.1f} ms" for n in trees],
        "–",
    )
    if counted:
        row(
            f"instructions per turn, the daemon alone ({args.instruction_sessions} sessions × "
            f"{args.instruction_prompts} prompts, callgrind)",
            [f"{counted[n][0] / 1e6:.2f} M" for n in trees],
            "–",
        )
    row(
        "peak RSS, daemon and children (worst round)",
        [f"{max(r['peak_rss_mb'] for r in loads[n]):.0f} MB" for n in trees],
        "≤ 100 MB",
    )
    row(
        "peak RSS of the daemon alone (VmHWM; worst round)",
        [f"{max(r['own_peak_rss_mb'] for r in loads[n]):.0f} MB" for n in trees],
        "–",
    )
    row(
        "processes alive at once: all / checkpoint preparers and git (worst round)",
        [
            f"{max(r['processes'] for r in loads[n]):.0f} / "
            f"{max(r['checkpoint_processes'] for r in loads[n]):.0f}"
            for n in trees
        ],
        "checkpoint ≤ 2",
    )
    row(
        "checkpoint processes seen over the load (sampled every 10 ms; worst round)",
        [f"{max(r['checkpoint_seen'] for r in loads[n]):.0f}" for n in trees],
        "–",
    )


if __name__ == "__main__":
    main()
