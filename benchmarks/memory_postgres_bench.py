"""Shared memory on PostgreSQL against files: Recall's fast phase, writes, visibility (issue #15).

Usage (from the repository root; needs the PostgreSQL server binaries, see .ci/system-packages)::

    .venv/bin/python benchmarks/memory_postgres_bench.py
    .venv/bin/python benchmarks/memory_postgres_bench.py --memories 1000 --writes 10

A throw-away PostgreSQL cluster (``cairn.testing.postgres``) on a loopback port holds one
namespace of ``--memories`` project memories; the file backend gets the same memories in a
folder. Every figure is measured for both backends in one run (ratios, medians):

- **first fast result, new process**: a fresh Python process opens the memory manager and runs
  one fast-phase search (the figure is from the manager's creation to the result; interpreter
  start and imports excluded). ``postgres, new machine`` starts with an empty cairn home: the
  whole namespace comes from the database. ``restart`` is a second process on the same home
  (mirror, sync state and the index cache kept).
- **warm fast phase**: ``search`` (refresh + rank, as each fresh turn's Recall) in a warm
  manager, median and p95 of ``--queries`` queries.
- **Extract write**: one locked write section as Extract's ``write_file`` makes it (a new memory
  file, ``MEMORY.md`` rebuilt; with postgres one transaction and its commit), median and p95.
- **visible in another process**: from the start of a write section in this process until
  another process finds the memory with ``search`` (files: the same folder; postgres: its own
  home, another machine); by LISTEN/NOTIFY, and with the notification missed (a row written
  without one: the poll fallback, ``pollSeconds`` 1).
- **8 writers × 20 extractions**: ``tests/e2e/memory_worker.py`` on 8 machines, one namespace
  of its own (empty at the start); what the database holds afterwards (lost writes must be 0).

The README next to this file records the figures, the command and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = ROOT / "tests" / "e2e" / "memory_worker.py"
NAMESPACE = "team"
TOPICS = ("deploy", "billing", "pytest", "docker", "release", "schema", "login", "cache", "queue")

_CHILD = r"""
import json, os, sys, time
from pathlib import Path
from cairn.config.settings import Settings
from cairn.memory.manager import MemoryManager

mode, project, query = sys.argv[1], Path(sys.argv[2]), sys.argv[4]
settings = Settings.model_validate(json.loads(sys.argv[3]))
if mode == "first":
    started = time.perf_counter()
    manager = MemoryManager(project, settings=settings)
    found = manager.search(query, limit=5)
    elapsed = time.perf_counter() - started
    assert found, "no result"
    manager.close()
    print(json.dumps({"seconds": elapsed}), flush=True)
elif mode == "turn":
    import asyncio
    from cairn.config.loader import Endpoint
    from cairn.llm.openai import OpenAIProvider
    from cairn.memory.recall.render import RELEVANT_MEMORY_HEADING
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest
    from cairn.testing import ScriptedServer, reply

    async def turn():
        arrived = []

        def answer(request):
            if request.purpose == "main" and not arrived:
                arrived.append((time.perf_counter(), request))
            if request.purpose == "recall-selector":
                return reply('{"selected_memories": []}')
            return reply("Done." if request.purpose == "main" else "Nothing to save.")

        async def sink(event):
            return None

        async with ScriptedServer(handler=answer) as server:
            provider = OpenAIProvider(base_url=server.base_url, api_key="k", model="m", timeout=60)
            runtime = Runtime(cwd=project, settings=settings, provider=provider,
                              endpoint=Endpoint(server.base_url, "k", "m"), record_chats=False)
            opened = time.perf_counter()
            session = runtime.new_session()  # starts the memory's warm-up
            await asyncio.sleep(float(sys.argv[5]))  # the user typing (0: `cairn -p`)
            asked = time.perf_counter()
            result = await session.prompt(PromptRequest(query), sink)
            assert result.stop_reason == "end_turn", result.error
            await runtime.memory_ready()
            warmed = time.perf_counter()
            docs = runtime.memory_manager().store.count()
            await runtime.aclose()
        (at, first), = arrived
        events = [json.loads(line) for line in open(os.environ["CAIRN_TELEMETRY_FILE"])]
        fast = [e["latency_ms"] for e in events  # the first request's (fast or settled)
                if e["event"] == "memory.recall.delivery" and e["delivery_point"] == "initial"]
        return {"first_request": at - asked, "carried": first.contains(RELEVANT_MEMORY_HEADING),
                "fast_ms": fast[0] if fast else None, "warm_up": warmed - opened, "docs": docs}

    print(json.dumps(asyncio.run(turn())), flush=True)
elif mode == "watch":
    manager = MemoryManager(project, settings=settings)
    manager.search(query)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        title = line.strip()
        while not any(s.doc.title == title for s in manager.search(title, limit=3)):
            time.sleep(0.002)
        print(json.dumps({"seen": time.time()}), flush=True)
    manager.close()
"""


def _memory(n: int) -> str:
    topic = TOPICS[n % len(TOPICS)]
    return (
        f"---\nname: Fact {n} about {topic}\ndescription: what we learned about {topic}, "
        f"number {n}\ntype: project\n---\n\nThe {topic} fact number {n}: keep it in mind.\n"
    )


def _settings(backend: str, dsn: str = "", poll: float = 5.0) -> dict[str, Any]:
    memory: dict[str, Any] = {"backend": backend, "minAvailableMemoryMb": 0}
    if backend == "postgres":
        memory["postgres"] = {"dsn": dsn, "namespace": NAMESPACE, "pollSeconds": poll}
    return {"memory": memory}


def _manager(project: Path, settings: dict[str, Any], home: Path) -> Any:
    from cairn.config.settings import Settings
    from cairn.memory.manager import MemoryManager

    environ = {**os.environ, "CAIRN_HOME": str(home)}
    manager = MemoryManager(project, settings=Settings.model_validate(settings), environ=environ)
    assert not manager.backend_error, manager.backend_error
    return manager


def _write(manager: Any, relative: str, content: str) -> None:
    """One locked write section, as Extract's write_file: the file, then MEMORY.md rebuilt."""
    from cairn.memory.store.locks import hold_roots

    root = manager.roots.project
    with hold_roots(list(manager.root_map().values())):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        manager.store.rebuild_index_files()


def _seed(manager: Any, count: int) -> None:
    """``count`` memories in one write section (with postgres: one transaction)."""
    from cairn.memory.store.locks import hold_roots

    root = manager.roots.project
    with hold_roots(list(manager.root_map().values())):
        (root / "project").mkdir(parents=True, exist_ok=True)
        for n in range(count):
            (root / "project" / f"fact-{n}.md").write_text(_memory(n))
        manager.store.rebuild_index_files()
    manager.refresh()
    manager.close()


def _child(
    mode: str,
    project: Path,
    settings: dict[str, Any],
    home: Path,
    query: str,
    *extra: str,
    env: dict[str, str] | None = None,
) -> Any:
    env = {**os.environ, **(env or {}), "CAIRN_HOME": str(home)}
    args = [sys.executable, "-c", _CHILD, mode, str(project), json.dumps(settings), query, *extra]
    return subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)  # fmt: skip


def _first_result(project: Path, settings: dict[str, Any], home: Path) -> float:
    child = _child("first", project, settings, home, "how do we deploy billing")
    out, _ = child.communicate(timeout=600)
    return float(json.loads(out)["seconds"])


def _fresh_turn(
    project: Path, settings: dict[str, Any], home: Path, typing: float = 0.0
) -> dict[str, Any]:
    """A fresh machine's first turn (an empty ``home``), ``typing`` seconds after its session
    started: the first model request's delay from the prompt, whether it carried a memory,
    and the local warm-up's whole time (from the session's start)."""
    settings = {**settings, "memory": {**settings["memory"], "enableManagedAutoDream": False}}
    telemetry = home.with_name(home.name + "-telemetry.jsonl")
    telemetry.unlink(missing_ok=True)
    env = {"CAIRN_TELEMETRY_FILE": str(telemetry)}
    query = "how do we deploy billing"
    child = _child("turn", project, settings, home, query, str(typing), env=env)
    out, _ = child.communicate(timeout=600)
    return dict(json.loads(out))


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _row(label: str, by_backend: dict[str, list[float]], figure: Any) -> tuple[str, str, str]:
    return label, _ms(figure(by_backend["files"])), _ms(figure(by_backend["postgres"]))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _warm_search(manager: Any, queries: int) -> list[float]:
    times: list[float] = []
    manager.search("warm up")
    for n in range(queries):
        started = time.perf_counter()
        manager.search(f"what about the {TOPICS[n % len(TOPICS)]} fact {n}")
        times.append(time.perf_counter() - started)
    return times


def _writes(manager: Any, count: int, tag: str) -> list[float]:
    times: list[float] = []
    for n in range(count):
        started = time.perf_counter()
        _write(manager, f"feedback/{tag}-{n}.md", _memory(900_000 + n))
        times.append(time.perf_counter() - started)
    return times


def _visibility(
    project: Path, settings: dict[str, Any], watcher_home: Path, count: int, write: Any
) -> list[float]:
    """Seconds from the start of ``write(title, n)`` to another process finding the memory."""
    child = _child("watch", project, settings, watcher_home, "warm up")
    assert child.stdout is not None and child.stdin is not None
    assert json.loads(child.stdout.readline())["ready"]
    delays: list[float] = []
    for n in range(count):
        title = f"Visible probe {watcher_home.name} {n}"
        child.stdin.write(title + "\n")
        child.stdin.flush()
        started = time.time()  # the write's own time is part of the wait
        write(title, n)
        delays.append(float(json.loads(child.stdout.readline())["seen"]) - started)
    child.stdin.close()
    child.wait(30)
    return delays


def _section_writer(manager: Any) -> Any:
    def write(title: str, n: int) -> None:
        _write(manager, f"feedback/visible-{title.replace(' ', '-')}.md", _visible_memory(title, n))

    return write


def _unnotified_writer(dsn: str) -> Any:
    """Writes straight into the rows with no NOTIFY: a notification the watcher missed."""
    import psycopg

    def write(title: str, n: int) -> None:
        with psycopg.connect(dsn) as connection:
            connection.execute("SELECT set_config('cairn.namespace', %s, true)", (NAMESPACE,))
            row = connection.execute(
                "UPDATE cairn_memory_namespaces SET seq = seq + 1 WHERE namespace = %s "
                "RETURNING seq", (NAMESPACE,),
            ).fetchone()  # fmt: skip
            assert row is not None
            connection.execute(
                "INSERT INTO cairn_memory_docs (namespace, scope, path, content, mtime, seq) "
                "VALUES (%s, 'project', %s, %s, %s, %s)",
                (NAMESPACE, f"feedback/missed-{n}.md", _visible_memory(title, n).encode(),
                 time.time(), row[0]),
            )  # fmt: skip

    return write


def _visible_memory(title: str, n: int) -> str:
    return f"---\nname: {title}\ndescription: visibility probe {n}\ntype: project\n---\n\nProbe.\n"


def _writers(project: Path, dsn: str, base: Path, workers: int, rounds: int) -> dict[str, Any]:
    sys.path.insert(0, str(WORKER.parent))
    from memory_worker import SHARED_LOG, audit, shared_log_text

    reader = _manager(project, _settings("postgres", dsn), base / "writers-reader")
    _write(reader, SHARED_LOG, shared_log_text())
    started = time.perf_counter()
    children = [
        subprocess.Popen([sys.executable, str(WORKER), str(project), str(w), str(rounds),
                          "postgres"], env={**os.environ, "CAIRN_HOME": str(base / f"writer-{w}"),
                          "CAIRN_MEMORY_DSN": dsn}, stdout=subprocess.PIPE, text=True)
        for w in range(workers)
    ]  # fmt: skip
    results = [json.loads(child.communicate(timeout=900)[0]) for child in children]
    elapsed = time.perf_counter() - started
    reader.refresh()
    found = audit(reader.roots.project, workers, rounds)
    reader.close()
    return {"seconds": elapsed, "completed": sum(r["completed"] for r in results), **found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    from cairn.testing.postgres import PostgresServer

    with tempfile.TemporaryDirectory() as folder, PostgresServer() as server:
        base = Path(folder)
        server.create_role("cairn_app")
        dsn = server.create_database("memory", owner="cairn_app")
        project = base / "project"
        (project / ".git").mkdir(parents=True)
        backends = {"files": _settings("files"), "postgres": _settings("postgres", dsn)}
        seeded = time.perf_counter()
        _seed(_manager(project, backends["files"], base / "files-home"), args.memories)
        files_seed = time.perf_counter() - seeded
        seeded = time.perf_counter()
        _seed(_manager(project, backends["postgres"], base / "seeder"), args.memories)
        postgres_seed = time.perf_counter() - seeded

        rows: list[tuple[str, str, str]] = []
        rows.append(("seed (one write section)", _ms(files_seed), _ms(postgres_seed)))
        files_first = _first_result(project, backends["files"], base / "files-home")
        new_machine = _first_result(project, backends["postgres"], base / "machine-new")
        restart = _first_result(project, backends["postgres"], base / "machine-new")
        rows.append(("first fast result, new process", _ms(files_first), _ms(restart)))
        rows.append(("first fast result, postgres new machine", "–", _ms(new_machine)))

        managers = {
            "files": _manager(project, backends["files"], base / "files-home"),
            "postgres": _manager(project, backends["postgres"], base / "machine-a"),
        }
        warm = {name: _warm_search(m, args.queries) for name, m in managers.items()}
        rows.append(_row("warm fast phase, median", warm, statistics.median))
        rows.append(_row("warm fast phase, p95", warm, lambda v: _percentile(v, 0.95)))
        writes = {name: _writes(m, args.writes, name) for name, m in managers.items()}
        rows.append(_row("Extract write, median", writes, statistics.median))
        rows.append(_row("Extract write, p95", writes, lambda v: _percentile(v, 0.95)))
        files_seen = _visibility(project, backends["files"], base / "files-home", args.probes,
                                 _section_writer(managers["files"]))  # fmt: skip
        notified = _visibility(project, backends["postgres"], base / "machine-b", args.probes,
                               _section_writer(managers["postgres"]))  # fmt: skip
        seen = {"files": files_seen, "postgres": notified}
        rows.append(_row("visible in another process (notified), median", seen, statistics.median))
        rows.append(_row("visible in another process (notified), max", seen, max))
        for manager in managers.values():
            manager.close()
        polled = _visibility(project, _settings("postgres", dsn, poll=1.0), base / "machine-c",
                             args.probes, _unnotified_writer(dsn))  # fmt: skip
        rows.append(("visible, notification missed (pollSeconds 1), median", "–",
                     _ms(statistics.median(polled))))  # fmt: skip
        rows.append(("visible, notification missed (pollSeconds 1), max", "–", _ms(max(polled))))

        writers_dsn = server.create_database("writers", owner="cairn_app")
        writers = _writers(project, writers_dsn, base, args.workers, args.rounds)

    print(f"{args.memories:,} memories; {args.queries} queries, {args.writes} writes, "
          f"{args.probes} visibility probes\n")  # fmt: skip
    print("| figure | files | postgres |")
    print("|---|---|---|")
    for label, files, postgres in rows:
        print(f"| {label} | {files} | {postgres} |")
    lost = {k: v for k, v in writers.items() if k not in ("seconds", "completed")}
    print(f"\n{args.workers} writers × {args.rounds} extractions on one namespace: "
          f"{writers['completed']} completed in {writers['seconds']:.1f} s; {lost}")  # fmt: skip


if __name__ == "__main__":
    main()
