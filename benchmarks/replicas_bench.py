"""`cairn serve --database` replicas behind HAProxy against today's single-process daemon (#31).

Usage: python benchmarks/replicas_bench.py [--sessions 50] [--prompts 5] [--rounds 3]
       [--baseline ../other/src]

The load is daemon_bench.py's: ``--sessions`` SDK clients at once, each creating a session,
opening its event stream and sending ``--prompts`` prompts one after another to an instantly
answering scripted model; latency is from sending a prompt to receiving its ``turn_complete``.
It runs against, in turn (rounds alternate, so every configuration sees the same machine load):

- ``daemon``: one ``cairn serve`` without a database (sessions in its process and files);
- ``1 replica``: one ``cairn serve --database``, addressed directly;
- ``1 behind HAProxy``: the same behind HAProxy (``cairn.testing.haproxy``, the configuration
  docs/daemon.md documents);
- ``3 behind HAProxy``: three replicas behind it, round robin.

The database is a PostgreSQL started here on a loopback port (``cairn.testing.postgres``), a
fresh database per round. Database work per turn comes from PostgreSQL's own counters for that
database (``pg_stat_database``): transactions committed and rows written (inserted + updated)
from just before the load until the replicas have exited, divided by the turns; they include
the replicas' heartbeats, HAProxy's ``/ready`` checks (one ``SELECT 1`` per replica per
second) and the replicas' shutdown. CPU per turn is read from ``/proc`` around the load: the
``cairn serve`` processes' (every replica's), and PostgreSQL's (the server and its backends,
those that exited included), which shares the machine's cores with the replicas.

Medians over ``--rounds``; every process's home is its own temporary folder. ``--baseline`` (the
``src`` folder of another checkout) also runs that code's ``1 replica`` and ``1 behind HAProxy``
in every round (``(before)`` columns), so before and after come from one run under one load.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
from daemon_bench import (
    CAIRN,
    environment,
    free_port,
    health_ok,
    load,
    make_project,
    percentile,
    start_model_server,
    stop,
)

from cairn.testing.haproxy import HAProxy
from cairn.testing.postgres import PostgresServer

TOKEN = "bench-token"  # noqa: S105 - a throw-away token of this run's loopback daemons
APP_ROLE = "cairn_bench"
CONFIGURATIONS = ("daemon", "1 replica", "1 behind HAProxy", "3 behind HAProxy")
BEFORE = " (before)"  # a configuration of the --baseline code
STATS_SECONDS = 11.0  # PostgreSQL: an idle backend reports its counters within 10 s
_databases = itertools.count(1)


def spawn(env: dict[str, str], project: Path, port: int, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CAIRN, "--port", str(port), "--token", TOKEN, *args],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def ready(port: int) -> bool:
    import httpx

    try:
        answer = httpx.get(
            f"http://127.0.0.1:{port}/ready",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=2,
            trust_env=False,
        )
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU of a live process (with ``children``: of its waited-for children too)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _TICKS


def postgres_cpu(pid: int) -> float:
    """The PostgreSQL server's CPU so far: the postmaster's, its exited backends' (it waits for
    them) and its live ones'."""
    total = cpu_seconds(pid, children=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it exited meanwhile
        if int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


@contextmanager
def daemons(
    env: dict[str, str], project: Path, root: Path, count: int, dsn: str | None
) -> Iterator[tuple[list[int], list[int]]]:
    """``count`` daemons (replicas of ``dsn``, or one plain daemon), each with its own home;
    their ports and process ids once each is ready."""
    ports = [free_port() for _ in range(count)]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for number, port in enumerate(ports, 1):
            home = Path(tempfile.mkdtemp(prefix="replica-", dir=root))
            own = {**env, "HOME": str(home), "CAIRN_HOME": str(home / "cairn-home")}
            args = ["--database", dsn, "--replica-id", f"r{number}"] if dsn else []
            processes.append(spawn(own, project, port, *args))
        deadline = time.monotonic() + 120
        for process, port in zip(processes, ports, strict=True):
            while not (health_ok(port) and ready(port)):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"cairn serve on {port} did not get ready")
                time.sleep(0.05)
        yield ports, [process.pid for process in processes]
    finally:
        for process in processes:
            stop(process)


def counters(dsn: str) -> tuple[int, int]:
    """(transactions committed, rows inserted + updated) of the database so far."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SELECT pg_stat_force_next_flush()")
        row = connection.execute(
            "SELECT xact_commit, tup_inserted + tup_updated FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def run(
    name: str,
    baseline: Path | None,
    env: dict[str, str],
    project: Path,
    root: Path,
    server: PostgresServer,
    sessions: int,
    prompts: int,
) -> dict[str, float]:
    replicas = 3 if name.startswith("3") else 1
    if name.endswith(BEFORE):
        env = {**env, "PYTHONPATH": str(baseline)}
    dsn = None if name == "daemon" else server.create_database(
        f"bench_{next(_databases)}", owner=APP_ROLE
    )  # fmt: skip
    with ExitStack() as stack:
        ports, pids = stack.enter_context(daemons(env, project, root, replicas, dsn))
        url = f"http://127.0.0.1:{ports[0]}"
        if "HAProxy" in name:
            balancer = stack.enter_context(
                HAProxy([f"127.0.0.1:{port}" for port in ports], token=TOKEN)
            )
            url = balancer.url
        admin = server.dsn(dsn.rsplit("/", 1)[1]) if dsn else None
        if admin:  # an idle backend reports its counters within 10 s (and HAProxy is up)
            time.sleep(STATS_SECONDS)
        before = counters(admin) if admin else (0, 0)
        cpu_before = [cpu_seconds(pid) for pid in pids], postgres_cpu(server.pid)
        result, wall = asyncio.run(load(url, sessions, prompts, TOKEN))
        cpu_after = [cpu_seconds(pid) for pid in pids], postgres_cpu(server.pid)
    after = counters(admin) if admin else (0, 0)  # the replicas exited: every count reported
    for error in result.errors[:5]:
        print(f"{name}: error: {error}")
    turns = max(1, len(result.latencies))
    return {
        "turns": result.completed,
        "errors": len(result.errors),
        "wall": wall,
        "throughput": result.completed / wall,
        "p50": percentile(result.latencies, 0.5) if result.latencies else float("nan"),
        "p95": percentile(result.latencies, 0.95) if result.latencies else float("nan"),
        "transactions": (after[0] - before[0]) / turns,
        "rows": (after[1] - before[1]) / turns,
        "cpu": 1000 * (sum(cpu_after[0]) - sum(cpu_before[0])) / turns,
        "postgres_cpu": 1000 * (cpu_after[1] - cpu_before[1]) / turns if dsn else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="load runs (medians reported)")
    parser.add_argument("--baseline", type=Path, help="src folder of another checkout")
    args = parser.parse_args()
    names: tuple[str, ...] = CONFIGURATIONS
    if args.baseline:
        names = (*CONFIGURATIONS, f"1 replica{BEFORE}", f"1 behind HAProxy{BEFORE}")

    model, base_url = start_model_server()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    try:
        with tempfile.TemporaryDirectory() as tmp, PostgresServer() as server:
            server.create_role(APP_ROLE)
            root = Path(tmp)
            env = environment(base_url, root)
            project = make_project(root, memory=False)
            for _ in range(args.rounds):
                for name in names:
                    results[name].append(
                        run(
                            name, args.baseline, env, project, root, server, args.sessions,
                            args.prompts,
                        )
                    )  # fmt: skip
    finally:
        model.terminate()
        model.wait()

    total = args.sessions * args.prompts
    print("Load average at the end: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))
    print()
    print(f"| figure (median of {args.rounds}) | {' | '.join(names)} |")
    print(f"|---|{'---|' * len(names)}")

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    def row(label: str, cell: str) -> None:
        print(f"| {label} | {' | '.join(cell.format(**{k: median(n, k) for k in results[n][0]}) for n in names)} |")  # noqa: E501

    print(
        f"| completed of {total}, errors (worst round) | "
        + " | ".join(
            f"{min(r['turns'] for r in results[n]):.0f}, {max(r['errors'] for r in results[n]):.0f}"
            for n in names
        )
        + " |"
    )
    row("prompt → turn_complete p50", "{p50:.3f} s")
    row("prompt → turn_complete p95", "{p95:.3f} s")
    print(
        "| p95 of each round | "
        + " | ".join(", ".join(f"{r['p95']:.2f}" for r in results[n]) for n in names)
        + " |"
    )
    row("throughput", "{throughput:.1f} turns/s")
    row("wall", "{wall:.2f} s")
    row("database transactions per turn", "{transactions:.1f}")
    row("database rows written per turn", "{rows:.1f}")
    row("cairn serve CPU per turn", "{cpu:.1f} ms")
    row("PostgreSQL CPU per turn", "{postgres_cpu:.1f} ms")
    daemon_p95 = median("daemon", "p95")
    for name in names[1:]:
        print(f"\n{name}: p95 {median(name, 'p95') / daemon_p95:.2f}× the daemon's (target ≤ 1.5×)")


if __name__ == "__main__":
    main()
