"""``cairn -p`` from spawn to exit with memory on: the whole command, and the memory it saves.

Usage: python benchmarks/headless_exit_bench.py [--runs 9] [--baseline ../other/src]
       [--postgres [--memories 200] [--hold-lock | --same-machine] | --file-memories 10000]
       [--model-seconds 0 | --answer-while-indexing]

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

``--postgres``: the first ``cairn -p`` of a fresh machine with the PostgreSQL memory backend
(a throw-away cluster of ``cairn.testing.postgres``; ``--memories`` project memories in the
namespace, a database per tree). Each run gets a new cairn home, so an empty mirror: the
session's warm-up opens its database search, Recall's fast phase asks the database, and the
pull and indexing follow. ``--hold-lock``: this process holds the fresh mirror's lock from
before the spawn until ``cairn -p`` exits, as another writer on the machine would (the extract
worker it starts, another cairn process). ``--same-machine``: every run on one cairn home per
tree instead (its mirror and index kept: the runs after a machine's first). Figures are printed
as median (max).

``--file-memories N``: the memory in files (the default backend), ``N`` project memories, and
each run the first of its project on this machine: the saved index is removed before it, so its
warm-up reads every file (a first scan). Median (max) too.

``--model-seconds S``: the model answers the main request ``S`` seconds after it came (a real
model's latency: the turn then ends while the warm-up is further along); "answer → exit" is
from that answer to the process's exit. ``--answer-while-indexing`` (with ``--postgres``): the
model answers the main request once the process's first scan of the memory it pulled is under
way (its worker processes are running), so "answer → exit" is what an indexing under way adds
to the exit (the model server then runs in this process).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from core_bench import make_env, received, start_server
from process_tree import become_subreaper, descendants, reap_orphans

PROMPT = "how do we deploy service 17 to the staging cluster?"
WORKER_DEADLINE_S = 120.0
NAMESPACE = "team"  # --postgres: the project's memory namespace

# what each run holds while ``cairn -p`` runs (--hold-lock: the fresh mirror's lock)
Hold = Callable[[], AbstractContextManager[object]]


def one_run(
    env: dict[str, str],
    project: Path,
    record: Path,
    hold: Hold = contextlib.nullcontext,
    model_seconds: float = 0.0,
) -> dict[str, float]:
    seen = len(received(record))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with hold():
        started = time.time()
        process = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.main", "-p", PROMPT],
            cwd=project, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _running.append(process.pid)
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
    indexing = [r["received_at"] for r in requests if r.get("purpose") == "indexing"]
    answered = indexing[0] if indexing else first + model_seconds
    return {
        "first request (ms)": (first - started) * 1000,
        "spawn → exit (ms)": (exited - started) * 1000,
        "answer → exit (ms)": (exited - answered) * 1000,
        "CPU of cairn -p (ms)": own_cpu * 1000,
        "CPU of the extract worker (ms)": (all_cpu - own_cpu) * 1000,
        "spawn → memory saved (ms)": (saved - started) * 1000,
    }


_server_pids: set[int] = set()
_running: list[int] = []  # the pid of the cairn -p process running now (--answer-while-indexing)
INDEXING_DEADLINE_S = 60.0  # --answer-while-indexing: answer anyway after this long


def _scan_workers(parent: int) -> list[int]:
    """The first scan's worker processes of ``parent`` (``python -m cairn.memory.store.bulk``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"memory.store.bulk" in command:
            found.append(int(entry.name))
    return found


def _answering_while_indexing(record: Path) -> tuple[Callable[[], None], str]:
    """A model server in this process that records each request as ``start_server``'s does,
    and answers the main request once the running cairn -p's first scan is under way."""
    import asyncio

    from cairn.testing import RecordedRequest, ScriptedServer, reply

    log = record.open("a", encoding="utf-8")

    async def answer(request: RecordedRequest) -> None:
        line = {"received_at": request.received_at, "purpose": request.purpose}
        log.write(json.dumps(line) + "\n")
        log.flush()
        deadline = time.monotonic() + INDEXING_DEADLINE_S
        while request.purpose == "main" and time.monotonic() < deadline:
            if _running and _scan_workers(_running[-1]):
                line = {"received_at": time.time(), "purpose": "indexing"}
                log.write(json.dumps(line) + "\n")
                log.flush()
                return
            await asyncio.sleep(0.005)

    server = ScriptedServer(reply("ok"), handler=answer).start()

    def stop() -> None:
        server.stop()
        log.close()

    return stop, server.base_url


class Case:
    """One tree's runs: its environment and project; with a ``dsn`` (--postgres) each run gets
    a new cairn home (a fresh machine) and, with ``hold_lock``, its mirror locked."""

    def __init__(self, env: dict[str, str], project: Path, work: Path, dsn: str = "") -> None:
        self.env, self.project, self.work, self.dsn = env, project, work, dsn
        self.runs = 0
        self.hold_lock = False
        self.same_machine = False
        self.first_scan = False  # --file-memories: no saved index before each run

    def next_run(self) -> tuple[dict[str, str], Hold]:
        if not self.dsn:
            if self.first_scan:
                for index in Path(self.env["CAIRN_HOME"]).rglob("recall-index"):
                    shutil.rmtree(index)
            return self.env, contextlib.nullcontext
        self.runs += 1
        home = self.work / f"{self.project.name}-machine-{1 if self.same_machine else self.runs}"
        home.mkdir(exist_ok=True)
        trusted = {"security": {"trustedFolders": [str(self.project)]}}  # for its namespace
        (home / "settings.json").write_text(json.dumps(trusted))
        env = {**self.env, "CAIRN_HOME": str(home), "CAIRN_MEMORY_DSN": self.dsn}
        if not self.hold_lock:
            return env, contextlib.nullcontext
        return env, lambda: _mirror_locked(home, self.dsn)


def _mirror_locked(home: Path, dsn: str) -> AbstractContextManager[object]:
    from cairn.memory.store.locks import hold_local_roots
    from cairn.memory.store.postgres.backend import mirror_folder

    return hold_local_roots([mirror_folder(home, dsn, NAMESPACE) / "memory"])


def _seed(project: Path, dsn: str, seed_home: Path, memories: int) -> None:
    """``memories`` project memories in the namespace, written as one section."""
    from cairn.config.settings import Settings
    from cairn.memory.manager import MemoryManager
    from cairn.memory.store.locks import hold_roots

    settings = Settings.model_validate(
        {"memory": {"backend": "postgres", "postgres": {"namespace": NAMESPACE}}}
    )
    environ = {**os.environ, "CAIRN_HOME": str(seed_home), "CAIRN_MEMORY_DSN": dsn}
    manager = MemoryManager(project, settings=settings, environ=environ)
    root = manager.roots.project
    assert root is not None
    with hold_roots(list(manager.root_map().values())):
        (root / "project").mkdir(parents=True, exist_ok=True)
        for n in range(memories):
            (root / "project" / f"service-{n}.md").write_text(
                f"---\nname: Deploying service {n}\ndescription: how service {n} goes to the "
                f"staging cluster\ntype: project\n---\n\nService {n}: `make deploy-{n}`.\n"
            )
        manager.store.rebuild_index_files()
    manager.close()


def _fill(project: Path, env: dict[str, str], memories: int) -> None:
    """``memories`` project memory files and their ``MEMORY.md`` (--file-memories)."""
    from cairn.memory.paths import memory_roots

    root = memory_roots(project, environ=env).project
    assert root is not None
    (root / "project").mkdir(parents=True)
    for n in range(memories):
        (root / "project" / f"service-{n}.md").write_text(
            f"---\nname: Deploying service {n}\ndescription: how service {n} goes to the "
            f"staging cluster\ntype: project\n---\n\nService {n}: `make deploy-{n}`.\n"
        )
    lines = [f"- [Deploying service {n}](project/service-{n}.md)" for n in range(200)]
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", type=Path, help="the src folder of another checkout")
    parser.add_argument("--postgres", action="store_true", help="a fresh machine's first run")
    parser.add_argument("--memories", type=int, default=200, help="--postgres: in the database")
    parser.add_argument("--hold-lock", action="store_true", help="--postgres: mirror locked")
    parser.add_argument("--same-machine", action="store_true", help="--postgres: one home")
    parser.add_argument("--model-seconds", type=float, default=0.0,
                        help="the main answer's delay")  # fmt: skip
    parser.add_argument("--answer-while-indexing", action="store_true",
                        help="--postgres: the answer once the first scan is under way")  # fmt: skip
    parser.add_argument("--file-memories", type=int, default=0,
                        help="memory files, each run without a saved index")  # fmt: skip
    args = parser.parse_args()
    if not become_subreaper():
        raise SystemExit("this benchmark needs Linux (PR_SET_CHILD_SUBREAPER)")
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cairn-exit-bench-")))
        postgres = None
        if args.postgres:
            from cairn.testing.postgres import PostgresServer

            postgres = stack.enter_context(PostgresServer())
            postgres.create_role("cairn_app")
        record = work / "requests.jsonl"
        answers = [{"purpose": "main", "text": "ok", "delay": args.model_seconds}] * (
            (args.runs + 1) * 2 if args.model_seconds else 0
        )  # (one per main request; every other request gets the default "ok" at once)
        if args.answer_while_indexing:
            stop_server, base_url = _answering_while_indexing(record)
            stack.callback(stop_server)
        else:
            server, base_url = start_server(answers, record)
            stack.callback(server.wait)
            stack.callback(server.terminate)
        _server_pids.update(descendants(os.getpid()))  # the model server, PostgreSQL
        trees: dict[str, str | None] = {"this tree": None}
        if args.baseline is not None:
            trees["baseline"] = str(args.baseline.resolve())
        cases: dict[str, Case] = {}
        for name, src in trees.items():
            home = work / f"home-{len(cases)}"
            project = work / f"project-{len(cases)}"
            (project / ".git").mkdir(parents=True)
            home.mkdir()
            env = make_env(base_url, home)
            if src is not None:
                env["PYTHONPATH"] = src
            dsn = ""
            if postgres is not None:
                dsn = postgres.create_database(f"memory_{len(cases)}", owner="cairn_app")
                settings = {"memory": {"backend": "postgres", "postgres": {"namespace": NAMESPACE}}}
                (project / ".cairn").mkdir()
                (project / ".cairn" / "settings.json").write_text(json.dumps(settings))
                _seed(project, dsn, work / f"seed-{len(cases)}", args.memories)
            elif args.file_memories:
                _fill(project, env, args.file_memories)
            cases[name] = Case(env, project, work, dsn)
            cases[name].same_machine = args.same_machine
            cases[name].first_scan = args.file_memories > 0
        for case in cases.values():
            env, _ = case.next_run()
            one_run(env, case.project, record, model_seconds=args.model_seconds)  # bytecode
            case.hold_lock = args.hold_lock
        results: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, case in cases.items():
                env, hold = case.next_run()
                results[name].append(
                    one_run(env, case.project, record, hold, args.model_seconds)
                )
    load = os.getloadavg()
    spread = args.postgres or args.file_memories > 0
    what = "median (max)" if spread else "medians"
    print(f"\n{args.runs} runs per tree, {what}; load average {load[0]:.2f} / {load[1]:.2f}\n")
    names = list(results)
    title = "memory on, instant model"
    if args.postgres:
        machine = "one machine's runs" if args.same_machine else "a fresh machine"
        title = f"{machine}, PostgreSQL, {args.memories} memories"
        title += ", mirror locked by another writer" if args.hold_lock else ""
    elif args.file_memories:
        title = f"a project's first run, {args.file_memories} memory files, no saved index"
    if args.model_seconds:
        title += f", the model answering in {args.model_seconds:g} s"
    if args.answer_while_indexing:
        title += ", answered while it indexes"
    print(f"| `cairn -p`, {title} | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for figure in results[names[0]][0]:
        cells = []
        for name in names:
            values = [r[figure] for r in results[name]]
            cell = f"{statistics.median(values):.0f}"
            cells.append(f"{cell} ({max(values):.0f})" if spread else cell)
        print(f"| {figure} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
